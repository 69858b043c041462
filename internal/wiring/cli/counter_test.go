package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/brainexec/builtin"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestCounterReadsTheToolsBucket runs `awaken counter` against counters the example tool's
// own increment wrote: the command prints the value, and 0 for a counter never incremented.
func TestCounterReadsTheToolsBucket(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx := servicetest.Context(t, 30*time.Second)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: contracts.NewNames(contracts.DefaultPrefix).CountersBucket()})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := execcore.Increment(ctx, kv, builtin.CounterKey("hits")); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"hits": "3", "never": "0"} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), []string{"counter", name, "--nats-url", srv.URL()}, &stdout, &stderr); code != 0 {
			t.Fatalf("awaken counter %s: exit %d: %s", name, code, stderr.String())
		}
		if got := strings.TrimSpace(stdout.String()); got != want {
			t.Errorf("awaken counter %s printed %q, want %q", name, got, want)
		}
	}
}
