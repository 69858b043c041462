package state_test

import (
	"errors"
	"testing"

	"github.com/awaken-dev/awaken/internal/state"
)

// TestGetFromLeaderMatchesGet: the leader read returns what Get returns — the latest
// revision of a key, ErrNotFound for a key never written, deleted or purged — and a bucket
// that does not exist is ErrBucketNotFound.
func TestGetFromLeaderMatchesGet(t *testing.T) {
	s, kv, js, ctx := newStoreJS(t)
	leader := state.NewStore[counter](kv, state.WithJetStream(js))
	if _, err := s.Put(ctx, "r.1.a", counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "r.1.a", counter{N: 2, Trail: []string{"second"}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"r.1.deleted", "r.1.purged"} {
		if _, err := s.Put(ctx, k, counter{N: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "r.1.deleted", 0); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "r.1.purged"); err != nil {
		t.Fatal(err)
	}

	v, rev, err := leader.GetFromLeader(ctx, "r.1.a")
	if err != nil {
		t.Fatal(err)
	}
	want, wantRev, err := s.Get(ctx, "r.1.a")
	if err != nil {
		t.Fatal(err)
	}
	if v.N != want.N || len(v.Trail) != 1 || rev != wantRev {
		t.Fatalf("GetFromLeader = %+v at %d, Get = %+v at %d", v, rev, want, wantRev)
	}
	for _, k := range []string{"r.1.never", "r.1.deleted", "r.1.purged"} {
		if _, _, err := leader.GetFromLeader(ctx, k); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("GetFromLeader(%s) = %v, want ErrNotFound", k, err)
		}
	}
	if _, err := state.ReadFromLeader(ctx, js.Conn(), "no_such_bucket", "k"); !errors.Is(err, state.ErrBucketNotFound) {
		t.Errorf("ReadFromLeader of a missing bucket = %v, want ErrBucketNotFound", err)
	}
}
