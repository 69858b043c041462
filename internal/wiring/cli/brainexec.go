package cli

import (
	"context"
	"flag"
	"os"

	"github.com/awaken-dev/awaken/pkg/executor"
)

// brainExecCommand runs `awaken brain-exec`: the builtin tools served through pkg/executor, the
// same door a platform team's own executor uses, with the flags of every service.
func brainExecCommand(fs *flag.FlagSet, io cmdIO) runner {
	flags := declareServiceFlags(fs)
	return func(ctx context.Context, _ []string) error {
		stderr := io.stderr
		f, err := flags()
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
		// The process's signals are watched once, by Command: ctx ends on the first and
		// stopNow closes on the second.
		return x.RunUntil(ctx, stopNow(ctx))
	}
}
