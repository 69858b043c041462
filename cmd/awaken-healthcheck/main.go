// Command awaken-healthcheck probes one HTTP URL and exits 0 only when it answers 200.
// It is the health check of the awaken-nats image, which is built FROM scratch around
// nats-server and has no curl; the awaken image uses `awaken healthcheck` instead.
//
// Usage: awaken-healthcheck URL
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/awaken-dev/awaken/internal/health"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: awaken-healthcheck URL")
		os.Exit(2)
	}
	if err := health.Probe(context.Background(), os.Args[1], 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
