// Command reconciler is a sandbox test module that reconciles a call: it answers ran, with
// an output naming the idempotency key it found in AWAKEN_IDEMPOTENCY_KEY and the
// arguments it read on stdin, as the JSON answer a reconcile module writes on stdout.
package main

import (
	"encoding/json"
	"io"
	"os"
)

func main() {
	args, _ := io.ReadAll(os.Stdin)
	out := "reconciled " + os.Getenv("AWAKEN_IDEMPOTENCY_KEY") + " " + string(args)
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"outcome": "ran", "output": out})
}
