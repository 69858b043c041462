// Package wasmbuild runs the go command for tests of WebAssembly tools: it builds Go
// packages for wasip1 and precompiles built modules into a wazero compilation cache in a
// process without the race detector (package sandboxtest explains why). It imports
// nothing of awaken, so internal/sandbox's own tests, which cannot import sandboxtest
// (sandboxtest imports sandbox), use it as well. Only tests import it.
package wasmbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The inputs of the compiler process, sandboxtest's TestPrecompileHelper.
const (
	// EnvCacheDir is the compilation cache directory to fill.
	EnvCacheDir = "AWAKEN_PRECOMPILE_CACHE_DIR"
	// EnvModules lists the .wasm files to compile, separated by os.PathListSeparator.
	EnvModules = "AWAKEN_PRECOMPILE_MODULES"
)

// helperPackage is the import path of the package whose test binary compiles the modules.
const helperPackage = "github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"

// Build compiles the Go packages pkgs for wasip1: into the file out when there is one
// package, into the directory out (created if missing), each module named after its
// package's directory, when there are several — in one go build, so that they build in
// parallel on a shared cache. Without the go command its error matches exec.ErrNotFound.
func Build(out string, pkgs ...string) error {
	if len(pkgs) > 1 {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		out = filepath.Clean(out) + string(filepath.Separator)
	}
	args := append([]string{"build", "-trimpath", "-o", out}, pkgs...)
	return goCommand([]string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}, args...)
}

// Precompile compiles modules (paths of .wasm files) into the compilation cache
// directory dir in a separate process built without the race detector: sandboxtest's
// TestPrecompileHelper, run by `go test` (see there for why a test). It must be called
// from inside the awaken module (a test's working directory is). Without the go command
// its error matches exec.ErrNotFound.
func Precompile(dir string, modules ...string) error {
	return goCommand([]string{
		EnvCacheDir + "=" + dir,
		EnvModules + "=" + strings.Join(modules, string(os.PathListSeparator)),
	}, "test", "-count=1", "-run", "^TestPrecompileHelper$", helperPackage)
}

// goCommand runs the go command with args, in the environment of this process plus env.
// A -race inherited through GOFLAGS is dropped: a wasip1 build cannot take it, and the
// precompiler must not run under it (that is its point); the compilation cache's key does
// not depend on it, so a race-instrumented process loads what the precompiler compiled.
func goCommand(env []string, args ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build and precompile WebAssembly test modules: %w", err)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), "GOFLAGS="+withoutRace(os.Getenv("GOFLAGS")))
	cmd.Env = append(cmd.Env, env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, output)
	}
	return nil
}

func withoutRace(goflags string) string {
	var kept []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && f != "-race=true" {
			kept = append(kept, f)
		}
	}
	return strings.Join(kept, " ")
}
