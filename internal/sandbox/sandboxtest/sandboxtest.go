// Package sandboxtest gives tests that run WebAssembly modules under the race detector
// a compilation cache that costs about a second per module and process, instead of tens
// of seconds per module and engine.
//
// wazero compiles a module with Go code, so under -race compiling one of the example
// tools (a 3.5 MB Go wasip1 program) takes 15–30 s on a two-core machine, against about
// one second without the race detector. A [Cache] therefore compiles the modules in a
// separate process built without -race into a temporary cache directory, then loads
// them once into the test process and holds them: every engine of the process created
// with that CacheDir (EngineOptions.CacheDir, or executors.sandbox.cache_dir) shares the
// machine code in memory and neither compiles nor reads the disk again.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest/wasmbuild"
)

// Cache is a compilation cache directory, private to the test process, whose modules
// are compiled and held in memory until Close.
type Cache struct {
	// Dir is the cache directory to give the engines (EngineOptions.CacheDir or
	// executors.sandbox.cache_dir).
	Dir string
	pin *sandbox.Engine
}

// New creates a temporary cache directory, precompiles modules into it
// ([wasmbuild.Precompile]) and loads them into an engine that Close releases, so other
// engines on Dir find them in memory. Call Close (typically at the end of TestMain); it
// removes the directory.
func New(modules ...string) (*Cache, error) {
	root, err := os.MkdirTemp("", "awaken-wasm-cache-")
	if err != nil {
		return nil, err
	}
	c := &Cache{Dir: root}
	if err := c.fill(modules); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *Cache) fill(modules []string) error {
	if err := wasmbuild.Precompile(c.Dir, modules...); err != nil {
		return err
	}
	ctx := context.Background()
	pin, err := sandbox.NewEngine(ctx, sandbox.EngineOptions{CacheDir: c.Dir})
	if err != nil {
		return err
	}
	c.pin = pin
	for _, path := range modules {
		if err := pin.Load(ctx, path, sandbox.ModuleConfig{Path: path}); err != nil {
			return fmt.Errorf("load precompiled %s: %w", path, err)
		}
	}
	return nil
}

// Close releases the held modules and removes the cache directory.
func (c *Cache) Close() error {
	var err error
	if c.pin != nil {
		err = c.pin.Close(context.Background())
	}
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// ExampleModules lists the built modules of the example configuration's sandbox tools
// (repoRoot/examples/awaken.yaml; `make wasm` builds them into bin/wasm). A module that is
// not built is left out: the tests that need it say so.
func ExampleModules(repoRoot string) ([]string, error) {
	cfg, err := config.Load(filepath.Join(repoRoot, "examples", "awaken.yaml"))
	if err != nil {
		return nil, err
	}
	var modules []string
	for _, t := range cfg.Tools {
		path := cfg.ModulePath(t)
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err == nil {
			modules = append(modules, path)
		}
	}
	return modules, nil
}

// RunWithExampleModules is the body of a TestMain for a package whose tests start
// pipelines from configuration files (awaken dev, app.Start, the CLI): it precompiles the
// built example modules outside the race detector, points every configuration loaded by
// this process and its child processes at that cache ([config.EnvSandboxCacheDir]), runs
// the tests and removes the cache. Without built modules it just runs the tests.
func RunWithExampleModules(m *testing.M, repoRoot string) int {
	modules, err := ExampleModules(repoRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxtest:", err)
		return 1
	}
	if len(modules) == 0 {
		return m.Run()
	}
	cache, err := New(modules...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxtest: precompiling the example WebAssembly modules:", err)
		return 1
	}
	defer cache.Close()
	if err := os.Setenv(config.EnvSandboxCacheDir, cache.Dir); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxtest:", err)
		return 1
	}
	defer os.Unsetenv(config.EnvSandboxCacheDir)
	return m.Run()
}
