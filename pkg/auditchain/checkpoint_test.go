package auditchain_test

import (
	"encoding/json"
	"testing"

	"github.com/awaken-dev/awaken/pkg/auditchain"
)

// TestAnchorLinksPrunedChainsToTheirCheckpoint: a chain pruned from its head is anchored by
// a checkpoint naming the record before its first remaining one or one of its records; a
// checkpoint naming another hash, or a head past the chain's end (its tail removed), breaks
// at the checkpoint; a chain no checkpoint reaches is left unanchored.
func TestAnchorLinksPrunedChainsToTheirCheckpoint(t *testing.T) {
	const run, other, cpSubject = "awaken.audit.r", "awaken.audit.o", "awaken.audit.checkpoint.heads"
	recs := chain(t, run, 5, nil)
	head := func(n int) auditchain.CheckpointHead {
		l, err := auditchain.LinkOf(recs[n-1].Header)
		if err != nil {
			t.Fatal(err)
		}
		return auditchain.CheckpointHead{N: l.N, Hash: l.Hash, Seq: recs[n-1].Seq}
	}
	checkpoint := func(seq uint64, heads map[string]auditchain.CheckpointHead) auditchain.Record {
		data, err := json.Marshal(auditchain.Checkpoint{Heads: heads})
		if err != nil {
			t.Fatal(err)
		}
		r := chain(t, cpSubject, 1, nil)[0]
		r.Seq, r.Data = seq, data
		return r
	}
	o := chain(t, other, 3, nil)
	for i := range o {
		o[i].Seq += 100
	}
	tests := []struct {
		name     string
		from     int // run's first remaining n
		heads    map[string]auditchain.CheckpointHead
		anchored uint64 // the head n the checkpoint names for run; 0: not anchored
		broken   bool
	}{
		{"the head just before", 3, map[string]auditchain.CheckpointHead{run: head(2)}, 2, false},
		{"a remaining head", 2, map[string]auditchain.CheckpointHead{run: head(4)}, 4, false},
		{"too old to reach", 4, map[string]auditchain.CheckpointHead{run: head(2)}, 0, false},
		{"another hash just before", 3, map[string]auditchain.CheckpointHead{run: {N: 2, Hash: head(3).Hash}}, 0, true},
		{"another hash remaining", 2, map[string]auditchain.CheckpointHead{run: {N: 4, Hash: head(3).Hash}}, 0, true},
		{"past the chain's end", 2, map[string]auditchain.CheckpointHead{run: {N: 7, Hash: head(5).Hash}}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint(50, tc.heads)
			in := append(append(append([]auditchain.Record{}, recs[tc.from-1:]...), o[1:]...), cp)
			refs, err := auditchain.Anchor(in, cpSubject)
			if tc.broken {
				be := breakOf(t, err)
				if be.Seq != 50 || be.Reason != auditchain.BreakCheckpoint {
					t.Fatalf("break %+v, want the checkpoint at seq 50", be)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref, ok := refs[run]; ok != (tc.anchored > 0) || ref.N != tc.anchored || (ok && ref.Seq != 50) {
				t.Fatalf("run anchored %v at %+v, want n %d", ok, ref, tc.anchored)
			}
			if _, ok := refs[other]; ok {
				t.Fatalf("%s anchored though no checkpoint names it", other)
			}
		})
	}
}
