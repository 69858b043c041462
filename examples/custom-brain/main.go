// Command custom-brain is a Brain executor with a tool of its own: it serves the builtin
// tools plus `shout`, a typed tool defined below, in place of the stock `awaken brain-exec`.
// It is a module of its own and imports only public packages (pkg/executor,
// pkg/contracts), as a platform team's executor does.
//
//	NATS_USER=brain-exec NATS_PASSWORD=… custom-brain --nats-url nats://127.0.0.1:4222 --config awaken.yaml
//
// The configuration must register the tool (`- id: shout`, target brain) so the gate knows
// it exists and routes its calls here; the streams and buckets must exist already
// (`awaken setup`, or any awaken service started with --ensure).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor"
)

// ShoutArgs are shout's arguments; the model-visible JSON Schema is derived from this type
// and calls are decoded into it strictly.
type ShoutArgs struct {
	Text string `json:"text" desc:"The text to shout."`
}

// shout is the tool body: pure, so replaying it after a crash is safe. A long tool reports
// how far it is with executor.ReportProgress; the platform sees the reports, throttled, as
// io.awaken.tool.progress.v1 events on the run's events subject (never in the result).
func shout(ctx context.Context, a ShoutArgs) (string, error) {
	executor.ReportProgress(ctx, 1, 1, "shouting")
	return strings.ToUpper(a.Text) + "!", nil
}

func main() {
	natsURL := flag.String("nats-url", "nats://127.0.0.1:4222", "NATS server URL")
	cfgPath := flag.String("config", "awaken.yaml", "host configuration file")
	httpAddr := flag.String("http", "", "operations listener: /metrics, /healthz, /readyz")
	flag.Parse()
	cfg, err := executor.LoadConfig(*cfgPath)
	if err == nil {
		err = run(context.Background(), cfg, executor.Options{
			URL: *natsURL, User: os.Getenv("NATS_USER"), Password: os.Getenv("NATS_PASSWORD"),
			CredsFile: os.Getenv("NATS_CREDS"), HTTPAddr: *httpAddr,
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "custom-brain:", err)
		os.Exit(1)
	}
}

// newExecutor builds the executor: the builtin tools plus shout.
func newExecutor(cfg *executor.Config, o executor.Options) (*executor.Executor, error) {
	o.Builtins = true
	x, err := executor.New(cfg, o)
	if err != nil {
		return nil, err
	}
	if err := executor.Register(x, executor.ToolFunc("shout", "Shouts `text` back.", contracts.CapabilityReplaySafe, shout)); err != nil {
		return nil, err
	}
	return x, nil
}

// run serves Brain executor requests until ctx ends or SIGTERM, then drains gracefully.
func run(ctx context.Context, cfg *executor.Config, o executor.Options) error {
	x, err := newExecutor(cfg, o)
	if err != nil {
		return err
	}
	return x.Run(ctx)
}
