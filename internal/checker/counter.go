package checker

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Counter reads the durable value of the example `counter` tool's counter name (0 when it
// was never incremented) from the counters bucket of c's deployment: the tests prove with
// it how many times a body ran. It is a test's reading, not the client's: a platform has
// no business with the example tool's bucket, so pkg/client does not offer it.
//
// The key is the tool's ("counter." + name, internal/brainexec/builtin.CounterKey),
// spelled here because the checker imports no service code; the end-to-end tests that
// count body runs through it fail should the two differ.
func Counter(ctx context.Context, c *client.Client, name string) (int64, error) {
	js, err := jetstream.New(c.Conn())
	if err != nil {
		return 0, fmt.Errorf("checker: counters: %w", err)
	}
	n, err := execcore.ReadDeploymentCounter(ctx, js, contracts.NewNames(c.Prefix()), "counter."+name)
	if err != nil {
		return 0, fmt.Errorf("checker: %w", err)
	}
	return int64(n), nil
}
