package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
)

func TestRestartKeepsStreamsAndReconnects(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.URL()
	nc, js := srv.Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("one")); err != nil {
		t.Fatal(err)
	}

	srv.Restart(t)
	if got := srv.URL(); got != url {
		t.Fatalf("URL changed across restart: %s -> %s", url, got)
	}
	natstest.WaitFor(t, 10*time.Second, nc.IsConnected, "the client to reconnect")

	var msgs uint64
	natstest.WaitFor(t, 10*time.Second, func() bool {
		st, err := js.Stream(ctx, "T")
		if err != nil {
			return false
		}
		msgs = st.CachedInfo().State.Msgs
		return true
	}, "the stream to be back")
	if msgs != 1 {
		t.Fatalf("stream has %d messages after restart, want 1", msgs)
	}
}

func TestWaitForReturnsAsSoonAsTrue(t *testing.T) {
	n := 0
	natstest.WaitFor(t, time.Second, func() bool { n++; return n == 3 }, "three polls")
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

// recordingTB captures Fatalf instead of stopping the goroutine.
type recordingTB struct {
	testing.TB
	failed string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = format
}

func TestWaitForFailsOnDeadline(t *testing.T) {
	rec := &recordingTB{TB: t}
	start := time.Now()
	natstest.WaitFor(rec, 50*time.Millisecond, func() bool { return false }, "never")
	if rec.failed == "" {
		t.Fatal("WaitFor did not fail on a condition that never holds")
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Fatalf("WaitFor gave up after %s, before its timeout", elapsed)
	}
}
