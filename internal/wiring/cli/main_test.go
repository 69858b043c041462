package cli

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
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
	os.Exit(sandboxtest.RunWithExampleModules(m, "../../.."))
}

// parseConfig is the host configuration of yaml, failing t if it does not parse.
var parseConfig = servicetest.ParseConfig

// startStack starts services of cfg (the five of the pipeline when none are named) on a
// new embedded server, the way the commands under test meet a deployment (see
// [stacktest.Server.StartStack]: each service dialled in-process, the api's HTTP on a free
// port). The stack stops when the test ends, before the server does.
func startStack(t *testing.T, ctx context.Context, cfg *config.Config, services ...string) (*stacktest.Server, *stacktest.Stack) {
	t.Helper()
	srv := stacktest.NewServer(t)
	return srv, srv.StartStack(ctx, app.Options{Config: cfg, Services: services})
}

// runCLI runs awaken with args and returns the exit code, stdout and stderr.
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}
