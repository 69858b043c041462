package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
)

// wasmCacheDir is the compilation cache every pipeline of this process uses for its
// sandbox tools (executors.sandbox.cache_dir), set once by TestMain: the example modules
// are compiled once, outside the race detector, instead of once per started pipeline
// (about 20 s each under -race). Empty when the example modules are not built.
var wasmCacheDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	modules, err := sandboxtest.ExampleModules(repoRoot(nil))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if len(modules) > 0 {
		cache, err := sandboxtest.New(modules...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: precompiling the example WebAssembly modules:", err)
			return 1
		}
		defer cache.Close()
		wasmCacheDir = cache.Dir
	}
	return m.Run()
}
