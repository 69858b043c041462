package cli

import (
	"os"
	"testing"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
)

// commandEnv makes the test binary run [Command] on its arguments instead of the tests:
// the process tests start `awaken` as a child without building the binary.
const commandEnv = "AWAKEN_CLI_TEST_COMMAND"

// TestMain compiles the example WebAssembly tools once for the whole test process, outside
// the race detector, because these tests start pipelines from the example configuration.
func TestMain(m *testing.M) {
	if os.Getenv(commandEnv) == "1" {
		os.Exit(Command(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(sandboxtest.RunWithExampleModules(m, "../.."))
}
