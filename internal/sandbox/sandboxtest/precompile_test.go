package sandboxtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest/wasmbuild"
)

// TestPrecompileHelper is not a test but the compiler process of [wasmbuild.Precompile]:
// with AWAKEN_PRECOMPILE_CACHE_DIR set it compiles the modules listed in
// AWAKEN_PRECOMPILE_MODULES into that cache directory; otherwise it is skipped. It is a
// test, not a command, so that its binary is built as the race-instrumented test
// binaries are: wazero names its cache entries after its own version, which it reads
// from the build information, and a test binary of a non-main package has none ("dev")
// while a command has the module's ("v1.12.0") — the entries of one would be stale for
// the other.
func TestPrecompileHelper(t *testing.T) {
	dir := os.Getenv(wasmbuild.EnvCacheDir)
	if dir == "" {
		t.Skip("the compiler process of wasmbuild.Precompile; nothing to do in a test run")
	}
	ctx := context.Background()
	engine, err := sandbox.NewEngine(ctx, sandbox.EngineOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close(ctx)
	for _, path := range filepath.SplitList(os.Getenv(wasmbuild.EnvModules)) {
		start := time.Now()
		if err := engine.Load(ctx, path, sandbox.ModuleConfig{Path: path}); err != nil {
			t.Fatal(err)
		}
		t.Logf("compiled %s in %.2fs", path, time.Since(start).Seconds())
	}
}
