package cli

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/services/api"
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

// parseConfig is the host configuration of yaml, failing t if it does not parse.
func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startStack starts services of cfg (the five of the pipeline when none are named) on a
// new embedded server, the way the commands under test meet a deployment: each service
// dialled in-process, logging to the test log (see [servicetest.LogWriter]), the api's
// HTTP on a free port. The stack stops when the test ends, before the server does.
func startStack(t *testing.T, ctx context.Context, cfg *config.Config, services ...string) (*natstest.Server, *app.Stack) {
	t.Helper()
	srv := natstest.Start(t)
	st, err := app.Start(ctx, app.Options{
		Config:   cfg,
		Services: services,
		Dial:     app.InProcessDialer(srv.Server()),
		Log:      app.NewLogger(servicetest.LogWriter(t), os.Getenv("AWAKEN_TEST_LOG")),
		API:      api.Options{HTTPAddr: "127.0.0.1:0"},
	})
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	natstest.StopAtCleanup(t, "stack", 30*time.Second, st.Stop)
	return srv, st
}

// connectClient is an awaken client on srv, and the JetStream context of its connection
// for the reads the test makes itself.
func connectClient(t *testing.T, srv *natstest.Server) (*client.Client, jetstream.JetStream) {
	t.Helper()
	nc, js := srv.Conn(t)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c, js
}

// runCLI runs awaken with args and returns the exit code, stdout and stderr.
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}
