package e2e_test

import (
	"os"
	"testing"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
)

// TestMain compiles the example WebAssembly modules once for the whole test process,
// outside the race detector, into a cache every example configuration loaded here uses
// (executors.sandbox.cache_dir by config.EnvSandboxCacheDir), instead of once per started
// pipeline (about 20 s each under -race).
func TestMain(m *testing.M) {
	os.Exit(sandboxtest.RunWithExampleModules(m, ".."))
}
