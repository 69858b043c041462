package state_test

import (
	"errors"
	"fmt"
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

// confirmingStore is a store under test and how many times its Update runs fn for a
// decision it confirms on the stream leader.
type confirmingStore struct {
	name  string
	store *state.Store[counter]
	runs  int
}

// confirmingStores are the two stores a confirmation on the leader is tested on: leader,
// with the JetStream context, runs fn a second time on the value the stream leader holds;
// plain, without it, has no leader read and runs fn once.
func confirmingStores(plain, leader *state.Store[counter]) []confirmingStore {
	return []confirmingStore{{"with the leader read", leader, 2}, {"without", plain, 1}}
}

// TestUpdateConfirmsARefusalOnTheLeader: a transition fn refuses is refused again on the
// value the stream leader holds before Update returns the error (the first read may come
// from a replica behind the latest write); without the JetStream context there is no
// leader read and fn runs once.
func TestUpdateConfirmsARefusalOnTheLeader(t *testing.T) {
	s, kv, js, ctx := newStoreJS(t)
	leader := state.NewStore[counter](kv, state.WithJetStream(js))
	if _, err := s.Put(ctx, "k", counter{N: 7}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	for _, tc := range confirmingStores(s, leader) {
		t.Run(tc.name, func(t *testing.T) {
			var seen []int
			_, _, err := tc.store.Update(ctx, "k", func(cur *counter, exists bool) error {
				seen = append(seen, cur.N)
				return refused
			})
			if !errors.Is(err, refused) {
				t.Fatalf("Update = %v, want the refusal", err)
			}
			if len(seen) != tc.runs || seen[len(seen)-1] != 7 {
				t.Fatalf("fn saw %v, want %d runs on the stored value 7", seen, tc.runs)
			}
		})
	}
	// An absence fn refuses is confirmed the same way.
	var runs int
	if _, _, err := leader.Update(ctx, "absent", func(_ *counter, exists bool) error {
		runs++
		if exists {
			t.Error("absent key read as existing")
		}
		return refused
	}); !errors.Is(err, refused) || runs != 2 {
		t.Fatalf("Update of an absent key = %v after %d runs, want the refusal after 2", err, runs)
	}
}

// TestNoChangeOnLeaderIsConfirmedThere: a "nothing to write" that a lagging replica could
// answer wrongly (ErrNoChangeOnLeader, wrapped as callers wrap it) runs fn again on the
// leader's value and then returns that stored value with no error and no write; without
// the JetStream context there is no leader read and fn runs once.
func TestNoChangeOnLeaderIsConfirmedThere(t *testing.T) {
	s, kv, js, ctx := newStoreJS(t)
	leader := state.NewStore[counter](kv, state.WithJetStream(js))
	rev, err := s.Put(ctx, "k", counter{N: 7})
	if err != nil {
		t.Fatal(err)
	}
	notMine := fmt.Errorf("not mine: %w", state.ErrNoChangeOnLeader)
	for _, tc := range confirmingStores(s, leader) {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			got, gotRev, err := tc.store.Update(ctx, "k", func(cur *counter, exists bool) error {
				runs++
				cur.N = 99 // a change fn gives up must not be returned or written
				return notMine
			})
			if err != nil || got.N != 7 || gotRev != rev || runs != tc.runs {
				t.Fatalf("Update = %+v at %d, %v after %d runs; want {N:7} at %d, no error, after %d runs",
					got, gotRev, err, runs, rev, tc.runs)
			}
		})
	}
}
