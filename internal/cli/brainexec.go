package cli

import (
	"context"
	"io"
	"os"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/pkg/executor"
)

// runBrainExec runs `awaken brain-exec`: the builtin tools served through pkg/executor, the
// same door a platform team's own executor uses, with the flags of every service.
func runBrainExec(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags(app.BrainExec)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	auth := natsAuthFlags(fs)
	opsAddr := fs.String("http", env("AWAKEN_HTTP", ""), `address of the operations listener: /metrics, /healthz, /readyz ("" disables it; env AWAKEN_HTTP)`)
	ensure := ensureFlag(fs)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	cfg, err := executor.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	authOpts, err := auth()
	if err != nil {
		return err
	}
	x, err := executor.New(cfg, executor.Options{
		URL: *url, NATSOptions: authOpts, HTTPAddr: *opsAddr, Ensure: *ensure, Builtins: true,
		Log: stderr, LogLevel: os.Getenv("AWAKEN_LOG_LEVEL"),
	})
	if err != nil {
		return err
	}
	return x.Run(ctx)
}
