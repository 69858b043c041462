// Command custom-brain is a Brain executor with a tool of its own: it serves the builtin
// tools plus `shout`, a typed tool defined below, in place of the stock `awaken brain-exec`.
//
//	custom-brain --nats-url nats://127.0.0.1:4222 --config awaken.yaml
//
// The configuration must register the tool (`- id: shout`, target brain) so the gate knows
// it exists and routes its calls here; the streams and buckets must exist already (any
// awaken service or `awaken dev` creates them).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	brainexec "github.com/awaken-dev/awaken/services/brain-exec"
	"github.com/awaken-dev/awaken/services/brain-exec/builtin"
)

// ShoutArgs are shout's arguments; the model-visible JSON Schema is derived from this type
// and calls are decoded into it strictly.
type ShoutArgs struct {
	Text string `json:"text" desc:"The text to shout."`
}

// shout is the tool body: pure, so replaying it after a crash is safe.
func shout(_ context.Context, a ShoutArgs) (string, error) { return strings.ToUpper(a.Text) + "!", nil }

func main() {
	natsURL := flag.String("nats-url", nats.DefaultURL, "NATS server URL")
	cfgPath := flag.String("config", "awaken.yaml", "host configuration file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *natsURL, *cfgPath, zerolog.New(os.Stderr).With().Timestamp().Logger()); err != nil {
		fmt.Fprintln(os.Stderr, "custom-brain:", err)
		os.Exit(1)
	}
}

// run serves Brain executor requests until ctx ends, then drains gracefully.
func run(ctx context.Context, natsURL, cfgPath string, log zerolog.Logger) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	nc, js, err := bus.Connect(ctx, natsURL, "custom-brain")
	if err != nil {
		return err
	}
	defer nc.Close()
	env, err := pipeline.NewEnv(ctx, nc, js, cfg, log.With().Str("service", brainexec.ServiceName).Logger())
	if err != nil {
		return err
	}
	reg := brainexec.NewRegistry()
	if err := builtin.Register(reg, env); err != nil {
		return err
	}
	if err := brainexec.Register(reg, brainexec.ToolFunc("shout", "Shouts `text` back.", contracts.CapabilityReplaySafe, shout)); err != nil {
		return err
	}
	svc, err := brainexec.Start(context.WithoutCancel(ctx), env, reg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return svc.Stop(stopCtx)
}
