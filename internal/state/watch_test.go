package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/state"
)

// TestFollowHandsCurrentValuesThenUpdates: Follow hands apply the bucket's current values,
// calls caughtUp once after them (never handing apply the end marker), then hands the live
// updates, and returns when its life ends.
func TestFollowHandsCurrentValuesThenUpdates(t *testing.T) {
	_, kv, ctx := newStore(t)
	if _, err := kv.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	life, stop := context.WithCancel(ctx)
	entries := make(chan string, 4)
	caughtUp := make(chan struct{}) // closed twice would panic: caughtUp runs once
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		state.Follow(life, w, func() { close(caughtUp) }, func(e jetstream.KeyValueEntry) {
			entries <- e.Key() + "=" + string(e.Value())
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case e := <-entries:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no entry within 10 s")
			return ""
		}
	}
	if got := next(); got != "a=1" {
		t.Fatalf("first entry %q, want the current value a=1", got)
	}
	select {
	case <-caughtUp:
	case <-time.After(10 * time.Second):
		t.Fatal("caughtUp not called after the current values")
	}
	if _, err := kv.Put(ctx, "b", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "b=2" {
		t.Fatalf("live update %q, want b=2", got)
	}
	stop()
	select {
	case <-followed:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return when its life ended")
	}
}
