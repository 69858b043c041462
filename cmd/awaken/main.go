// Command awaken runs the awaken services and talks to a running deployment.
// See `awaken help` and README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/awaken-dev/awaken/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
