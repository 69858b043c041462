package state_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/state"
)

type counter struct {
	N     int      `json:"n"`
	Trail []string `json:"trail,omitempty"`
}

func newStore(t *testing.T, opts ...state.Option) (*state.Store[counter], jetstream.KeyValue, context.Context) {
	t.Helper()
	s, kv, _, ctx := newStoreJS(t, opts...)
	return s, kv, ctx
}

func newStoreJS(t *testing.T, opts ...state.Option) (*state.Store[counter], jetstream.KeyValue, jetstream.JetStream, context.Context) {
	t.Helper()
	js, ctx := startJetStream(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test_state", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return state.NewStore[counter](kv, opts...), kv, js, ctx
}

// startJetStream starts an embedded server for one test and returns its JetStream and a
// context that ends with the test, or after a minute.
func startJetStream(t *testing.T) (jetstream.JetStream, context.Context) {
	t.Helper()
	_, js := natstest.Start(t).Conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return js, ctx
}

func TestCreateGetPutDelete(t *testing.T) {
	s, _, ctx := newStore(t)

	if _, _, err := s.Get(ctx, "a"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get of a missing key: err = %v, want ErrNotFound", err)
	}
	rev, err := s.Create(ctx, "a", counter{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "a", counter{N: 2}); !errors.Is(err, state.ErrExists) {
		t.Fatalf("second Create: err = %v, want ErrExists", err)
	}
	v, grev, err := s.Get(ctx, "a")
	if err != nil || v.N != 1 || grev != rev {
		t.Fatalf("Get = %+v rev %d err %v; want N=1 rev %d", v, grev, err, rev)
	}
	prev, err := s.Put(ctx, "a", counter{N: 5})
	if err != nil || prev <= rev {
		t.Fatalf("Put rev %d err %v; want a revision after %d", prev, err, rev)
	}
	if err := s.Delete(ctx, "a", rev); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("Delete at a stale revision: err = %v, want ErrConflict", err)
	}
	if err := s.Delete(ctx, "a", prev); err != nil {
		t.Fatalf("Delete at the current revision: %v", err)
	}
	if _, _, err := s.Get(ctx, "a"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	// A deleted key can be created again.
	if _, err := s.Create(ctx, "a", counter{N: 9}); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	if err := s.Delete(ctx, "a", 0); err != nil {
		t.Fatalf("unconditional Delete: %v", err)
	}
}

func TestUpdateAtConflict(t *testing.T) {
	s, _, ctx := newStore(t)
	rev, err := s.Create(ctx, "k", counter{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := s.UpdateAt(ctx, "k", counter{N: 2}, rev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAt(ctx, "k", counter{N: 3}, rev); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("UpdateAt with a stale revision: err = %v, want ErrConflict", err)
	}
	if v, r, _ := s.Get(ctx, "k"); v.N != 2 || r != rev2 {
		t.Fatalf("after the conflicting update: %+v rev %d, want N=2 rev %d", v, r, rev2)
	}
}

func TestUpdateConcurrentIncrementsAreExact(t *testing.T) {
	const updaters, perUpdater = 8, 25
	s, _, ctx := newStore(t, state.WithMaxAttempts(1000))

	var wg sync.WaitGroup
	errs := make(chan error, updaters)
	for u := range updaters {
		wg.Go(func() {
			for i := range perUpdater {
				_, _, err := s.Update(ctx, "ctr", func(cur *counter, _ bool) error {
					cur.N++
					cur.Trail = append(cur.Trail, fmt.Sprintf("%d/%d", u, i))
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Update: %v", err)
	}
	v, _, err := s.Get(ctx, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if v.N != updaters*perUpdater {
		t.Fatalf("counter = %d, want %d: an update was lost", v.N, updaters*perUpdater)
	}
	// Every increment applied exactly once: the trail has no duplicates and no gaps.
	sort.Strings(v.Trail)
	seen := map[string]bool{}
	for _, s := range v.Trail {
		if seen[s] {
			t.Fatalf("increment %s applied twice", s)
		}
		seen[s] = true
	}
	if len(seen) != updaters*perUpdater {
		t.Fatalf("trail has %d distinct increments, want %d", len(seen), updaters*perUpdater)
	}
}

func TestUpdateFunctionResults(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		seed      *counter
		fn        func(cur *counter, exists bool) error
		wantErr   error
		wantN     int
		wantWrite bool
	}{
		{
			name:      "absent key is created",
			fn:        func(cur *counter, exists bool) error { cur.N = 7; return nil },
			wantN:     7,
			wantWrite: true,
		},
		{
			name:      "present key is updated",
			seed:      &counter{N: 1},
			fn:        func(cur *counter, exists bool) error { cur.N += 10; return nil },
			wantN:     11,
			wantWrite: true,
		},
		{
			name: "no change on present key writes nothing and returns the stored value",
			seed: &counter{N: 4},
			fn: func(cur *counter, exists bool) error {
				cur.N = 999 // mutation before giving up must not leak
				return fmt.Errorf("already there: %w", state.ErrNoChange)
			},
			wantN: 4,
		},
		{
			name:  "no change on absent key writes nothing",
			fn:    func(cur *counter, exists bool) error { return state.ErrNoChange },
			wantN: 0,
		},
		{
			name:    "other error aborts",
			seed:    &counter{N: 2},
			fn:      func(cur *counter, exists bool) error { cur.N = 50; return errBoom },
			wantErr: errBoom,
			wantN:   2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, kv, ctx := newStore(t)
			var seedRev uint64
			if tc.seed != nil {
				var err error
				if seedRev, err = s.Create(ctx, "k", *tc.seed); err != nil {
					t.Fatal(err)
				}
			}
			v, rev, err := s.Update(ctx, "k", tc.fn)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && v.N != tc.wantN {
				t.Fatalf("returned N = %d, want %d", v.N, tc.wantN)
			}
			st, err2 := kv.Status(ctx)
			if err2 != nil {
				t.Fatal(err2)
			}
			lastSeq := st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
			if tc.wantWrite {
				if rev == 0 || rev != lastSeq {
					t.Fatalf("write returned rev %d, bucket last sequence %d", rev, lastSeq)
				}
			} else {
				if lastSeq != seedRev {
					t.Fatalf("bucket last sequence moved from %d to %d: something was written", seedRev, lastSeq)
				}
				if err == nil && rev != seedRev {
					t.Fatalf("returned rev %d, want the unchanged %d", rev, seedRev)
				}
			}
			if tc.seed != nil || tc.wantWrite {
				got, _, gerr := s.Get(ctx, "k")
				if gerr != nil || got.N != tc.wantN {
					t.Fatalf("stored N = %d (err %v), want %d", got.N, gerr, tc.wantN)
				}
			}
		})
	}
}

func TestUpdateGivesUpAfterBudget(t *testing.T) {
	s, kv, ctx := newStore(t, state.WithMaxAttempts(3))
	if _, err := s.Create(ctx, "k", counter{N: 0}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, _, err := s.Update(ctx, "k", func(cur *counter, _ bool) error {
		calls++
		// Another writer sneaks in between every read and write.
		if _, err := kv.Put(ctx, "k", []byte(`{"n":-1}`)); err != nil {
			return err
		}
		cur.N++
		return nil
	})
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict after the budget", err)
	}
	if calls != 3 {
		t.Fatalf("fn called %d times, want 3", calls)
	}
}

func TestListReturnsExactlyTheFilteredKeys(t *testing.T) {
	s, _, ctx := newStore(t)
	for _, k := range []string{"run-1.3.call_a", "run-1.3.call_b", "run-1.4.call_a", "run-2.3.call_a"} {
		if _, err := s.Put(ctx, k, counter{N: len(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "run-1.3.call_b", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "run-1.3.call_c", counter{N: 1}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, filter string
		want         []string
	}{
		{"one batch", "run-1.3.*", []string{"run-1.3.call_a", "run-1.3.call_c"}},
		{"one run", "run-1.>", []string{"run-1.3.call_a", "run-1.3.call_c", "run-1.4.call_a"}},
		{"everything", "", []string{"run-1.3.call_a", "run-1.3.call_c", "run-1.4.call_a", "run-2.3.call_a"}},
		{"nothing", "run-9.>", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k, e := range got {
				keys = append(keys, k)
				if e.Key != k || e.Revision == 0 {
					t.Fatalf("entry %s = %+v", k, e)
				}
				if k == "run-1.3.call_c" && e.Value.N != 1 {
					t.Fatalf("value of %s = %+v", k, e.Value)
				}
			}
			sort.Strings(keys)
			if fmt.Sprint(keys) != fmt.Sprint(tc.want) {
				t.Fatalf("keys = %v, want %v", keys, tc.want)
			}
		})
	}
}

// GetMany must return what Get returns for every key — current values with their
// revisions, nothing for a deleted or never-written key — in one batch request or key by
// key alike.
func TestGetManyMatchesGet(t *testing.T) {
	s, kv, js, ctx := newStoreJS(t)
	batched := state.NewStore[counter](kv, state.WithJetStream(js))
	for _, k := range []string{"r.1.a", "r.1.b", "r.1.c", "r.2.a"} {
		if _, err := s.Put(ctx, k, counter{N: len(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "r.1.a", counter{N: 42}); err != nil { // a second revision
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "r.1.b", 0); err != nil {
		t.Fatal(err)
	}
	keys := []string{"r.1.a", "r.1.b", "r.1.c", "r.1.never"}
	for name, store := range map[string]*state.Store[counter]{"batched": batched, "key by key": s} {
		t.Run(name, func(t *testing.T) {
			got, err := store.GetMany(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("GetMany = %+v, want r.1.a and r.1.c", got)
			}
			for _, k := range []string{"r.1.a", "r.1.c"} {
				v, rev, err := s.Get(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				if e := got[k]; e.Key != k || e.Value.N != v.N || e.Revision != rev {
					t.Fatalf("GetMany[%s] = %+v, Get = %+v at %d", k, e, v, rev)
				}
			}
			none, err := store.GetMany(ctx, []string{"r.9.x", "r.9.y"})
			if err != nil || len(none) != 0 {
				t.Fatalf("GetMany of missing keys = %v, %v", none, err)
			}
		})
	}
}

// TestGetManyAllocatesForItsKeys: a batch get of a batch's few call records (the
// publisher's barrier reads one per batch) allocates for the answers it can get, not a
// buffer for the connection's 65,536 pending messages (half a MiB, cleared, per read).
func TestGetManyAllocatesForItsKeys(t *testing.T) {
	_, kv, js, ctx := newStoreJS(t)
	batched := state.NewStore[counter](kv, state.WithJetStream(js))
	keys := []string{"r.1.a", "r.1.b", "r.1.c"}
	for _, k := range keys {
		if _, err := batched.Put(ctx, k, counter{N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() {
		got, err := batched.GetMany(ctx, keys)
		if err != nil || len(got) != len(keys) {
			t.Fatalf("GetMany = %v, %v", got, err)
		}
	}
	read()
	const reads = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range reads {
		read()
	}
	runtime.ReadMemStats(&after)
	// The whole process counts (the embedded server's side of each read included).
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 64<<10 {
		t.Errorf("a batch get of %d keys allocates %d bytes, want under 64 KiB", len(keys), per)
	}
}

func TestDecodeErrorIsReported(t *testing.T) {
	s, kv, ctx := newStore(t)
	if _, err := kv.Put(ctx, "bad", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "bad"); err == nil {
		t.Fatal("Get of a corrupt record succeeded")
	}
	if _, _, err := s.Update(ctx, "bad", func(*counter, bool) error { return nil }); err == nil {
		t.Fatal("Update of a corrupt record succeeded")
	}
}

// TestRequestWithoutReplyIsBounded: a write whose reply never comes (a bucket leader that
// stopped after receiving it) fails after the store's request timeout with an error
// matching context.DeadlineExceeded, while the caller's context is still alive — it does
// not wait out the caller's whole deadline (a handler's minute, in the services).
func TestRequestWithoutReplyIsBounded(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := srv.Conn(t)
	setup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(setup, jetstream.KeyValueConfig{Bucket: "silent", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := state.NewStore[counter](kv, state.WithRequestTimeout(200*time.Millisecond))
	// The bucket's stream goes away and something that never answers takes its subjects:
	// every write is received and left without a reply.
	if err := js.DeleteStream(setup, "KV_silent"); err != nil {
		t.Fatal(err)
	}
	natstest.Silence(t, nc, "$KV.silent.>")

	// The caller allows far more than the request timeout.
	caller, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	for name, write := range map[string]func() error{
		"create": func() error { _, err := s.Create(caller, "k", counter{N: 1}); return err },
		"put":    func() error { _, err := s.Put(caller, "k", counter{N: 1}); return err },
		"update": func() error { _, err := s.UpdateAt(caller, "k", counter{N: 2}, 1); return err },
	} {
		err := write()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s without a reply: %v, want an error matching context.DeadlineExceeded", name, err)
		}
		if caller.Err() != nil {
			t.Fatalf("%s without a reply waited out the caller's deadline", name)
		}
	}
}
