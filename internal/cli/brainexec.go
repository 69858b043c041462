package cli

import (
	"context"
	"io"
	"os"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor"
)

// runBrainExec runs `awaken brain-exec`: the builtin tools served through pkg/executor, the
// same door a platform team's own executor uses, with the flags of every service.
func runBrainExec(ctx context.Context, args []string, stderr io.Writer) error {
	f, err := parseServiceFlags(contracts.ServiceBrainExec, args, stderr)
	if err != nil {
		return err
	}
	cfg, err := executor.LoadConfig(f.cfgPath)
	if err != nil {
		return err
	}
	x, err := executor.New(cfg, executor.Options{
		URL: f.url, NATSOptions: f.authOpts, HTTPAddr: f.opsAddr, Ensure: f.ensure, Builtins: true,
		Log: stderr, LogLevel: os.Getenv("AWAKEN_LOG_LEVEL"),
	})
	if err != nil {
		return err
	}
	return x.Run(ctx)
}
