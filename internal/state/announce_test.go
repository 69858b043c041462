package state_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/state"
)

// TestAnnouncedWritesAreRecordsWithHeaders shows that a store WithAnnounce writes the
// revisions its function announces as key-value revisions carrying the headers (a
// Nats-Msg-Id excepted), that gets read them as plain values, that the compare-and-swap
// still refuses a stale revision and a second create, that a create after a delete
// succeeds, and that a revision the function does not announce is a plain write.
func TestAnnouncedWritesAreRecordsWithHeaders(t *testing.T) {
	_, kv, js, ctx := newStoreJS(t) // the bucket keeps one revision per key: read each at once
	s := state.NewStore[counter](kv, state.WithJetStream(js)).WithAnnounce(
		func(_ context.Context, key string, v *counter) nats.Header {
			if v.N%2 == 1 {
				return nil // even values hand work on, odd ones do not
			}
			return nats.Header{"ce-type": {"test.even"}, "ce-id": {key + ":" + strconv.Itoa(v.N)},
				jetstream.MsgIDHeader: {"must-not-be-sent"}}
		})
	stream, err := js.Stream(ctx, "KV_test_state")
	if err != nil {
		t.Fatal(err)
	}
	headersOf := func(rev uint64) nats.Header {
		t.Helper()
		m, err := stream.GetMsg(ctx, rev)
		if err != nil {
			t.Fatalf("revision %d: %v", rev, err)
		}
		return m.Header
	}

	rev, err := s.Create(ctx, "a", counter{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	h := headersOf(rev)
	if h.Get("ce-type") != "test.even" || h.Get("ce-id") != "a:2" || h.Get(jetstream.MsgIDHeader) != "" {
		t.Fatalf("created revision headers = %v, want the announced ones without a message id", h)
	}
	if v, grev, err := s.Get(ctx, "a"); err != nil || v.N != 2 || grev != rev {
		t.Fatalf("Get = %+v rev %d err %v, want N=2 rev %d", v, grev, err, rev)
	}
	if _, err := s.Create(ctx, "a", counter{N: 4}); !errors.Is(err, state.ErrExists) {
		t.Fatalf("second announced Create: err = %v, want ErrExists", err)
	}
	rev2, err := s.UpdateAt(ctx, "a", counter{N: 4}, rev)
	if err != nil {
		t.Fatal(err)
	}
	if h := headersOf(rev2); h.Get("ce-id") != "a:4" {
		t.Errorf("updated revision headers = %v, want ce-id a:4", h)
	}
	if _, err := s.UpdateAt(ctx, "a", counter{N: 6}, rev); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("announced UpdateAt on a stale revision: err = %v, want ErrConflict", err)
	}
	_, rev3, err := s.Update(ctx, "a", func(cur *counter, _ bool) error { cur.N++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if h := headersOf(rev3); h.Get("ce-type") != "" {
		t.Errorf("an unannounced revision carries headers %v", h)
	}

	if err := s.Delete(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	rev4, err := s.Create(ctx, "a", counter{N: 8})
	if err != nil {
		t.Fatalf("announced Create after a delete: %v", err)
	}
	if h := headersOf(rev4); h.Get("ce-id") != "a:8" {
		t.Errorf("re-created revision headers = %v, want ce-id a:8", h)
	}
	// A watcher sees the announced revision as a plain value.
	w, err := kv.Watch(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	if e := <-w.Updates(); e == nil || string(e.Value()) != `{"n":8}` || e.Revision() != rev4 {
		t.Fatalf("watcher entry = %v, want {\"n\":8} at %d", e, rev4)
	}
}
