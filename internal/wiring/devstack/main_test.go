package devstack_test

import (
	"os"
	"testing"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
)

// TestMain compiles the example WebAssembly tools once for the whole test process, outside
// the race detector, because these tests start pipelines from the example configuration.
func TestMain(m *testing.M) {
	os.Exit(sandboxtest.RunWithExampleModules(m, "../../.."))
}
