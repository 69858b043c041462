package e2e_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
)

// parallelCellsPerProc is this package's default -parallel per processor. The only
// parallel tests here are the crash matrix's cells, and half of a cell's time is its
// outage (the run retention, its stack dead and nothing to compute), so two cells per
// processor finish the matrix sooner than go test's default of one, without starving
// the cells that are running.
const parallelCellsPerProc = 2

// TestMain compiles the example WebAssembly modules once for the whole test process,
// outside the race detector, into a cache every example configuration loaded here uses
// (executors.sandbox.cache_dir by config.EnvSandboxCacheDir), instead of once per started
// pipeline (about 20 s each under -race). It sets -parallel to parallelCellsPerProc per
// processor unless the command line gives it.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelCellsPerProc*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	os.Exit(sandboxtest.RunWithExampleModules(m, ".."))
}
