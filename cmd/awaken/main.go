// Command awaken runs the awaken services and talks to a running deployment.
// See `awaken help` and README.md.
package main

import (
	"os"

	"github.com/awaken-dev/awaken/internal/wiring/cli"
)

func main() {
	os.Exit(cli.Command(os.Args[1:], os.Stdout, os.Stderr))
}
