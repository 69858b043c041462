package auditchain

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Checkpoint is the data of a checkpoint record: the head of every chain of the audit
// stream at one moment (the cut). Stored as a record of its own subject's chain, hashed and
// signed like every other, it lets a chain whose oldest records retention removed verify
// from the head the checkpoint names instead of from a record nothing vouches for.
type Checkpoint struct {
	// Period is the start of the period the checkpoint was written for: its id derives from
	// it, so the writers of one period (gate replicas) store it once.
	Period time.Time `json:"period"`
	// CutSeq is the stream's last sequence when the heads were read.
	CutSeq uint64 `json:"cut_seq"`
	// Heads is the last record of every chain (subject) at the cut.
	Heads map[string]CheckpointHead `json:"heads"`
}

// CheckpointHead is a chain's last record at a checkpoint's cut.
type CheckpointHead struct {
	N    uint64 `json:"n"`
	Hash string `json:"hash"`
	Seq  uint64 `json:"seq"` // stream sequence of the record
}

// CheckpointRef names the checkpoint record a chain was verified from.
type CheckpointRef struct {
	Seq  uint64    `json:"seq"`  // stream sequence of the checkpoint record
	Time time.Time `json:"time"` // when the stream stored it
	N    uint64    `json:"n"`    // the chain's head the checkpoint names
}

// BreakCheckpoint: a checkpoint record cannot be read, or names a head its chain's
// remaining records contradict (another hash at that position, or a position past the
// chain's end: records after it were removed).
const BreakCheckpoint Reason = "checkpoint"

// Anchor checks the chains of records against the checkpoint records among them (those on
// checkpointSubject) and returns, for each chain whose first remaining record is not its
// first (n > 1), the latest checkpoint whose head links to it: the head is the record just
// before it (n-1 and its prev hash), or a remaining record of the chain (same n and hash).
// A chain no checkpoint links to is absent from the map: nothing vouches for its first
// record. Anchor trusts the records' own links and signatures, which [Verify] checks: call
// it after Verify succeeded on the same records. A checkpoint whose head of a chain
// contradicts that chain's remaining records is a *BreakError naming the checkpoint.
func Anchor(records []Record, checkpointSubject string) (map[string]CheckpointRef, error) {
	sorted := append([]Record(nil), records...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Seq < sorted[j].Seq })
	type chain struct {
		first, last Link
		hashes      map[uint64]string
	}
	chains := map[string]*chain{}
	var checkpoints []Record
	for _, r := range sorted {
		if r.Subject == checkpointSubject {
			checkpoints = append(checkpoints, r)
			continue
		}
		l, err := LinkOf(r.Header)
		if err != nil {
			return nil, &BreakError{Seq: r.Seq, Subject: r.Subject, Reason: BreakUnchained, Detail: err.Error()}
		}
		c := chains[r.Subject]
		if c == nil {
			c = &chain{first: l, hashes: map[uint64]string{}}
			chains[r.Subject] = c
		}
		c.last = l
		c.hashes[l.N] = l.Hash
	}
	out := map[string]CheckpointRef{}
	for _, cr := range checkpoints {
		l, _ := LinkOf(cr.Header)
		broken := func(format string, args ...any) error {
			return &BreakError{Seq: cr.Seq, Subject: cr.Subject, N: l.N, Reason: BreakCheckpoint, Detail: fmt.Sprintf(format, args...)}
		}
		var cp Checkpoint
		if err := json.Unmarshal(cr.Data, &cp); err != nil {
			return nil, broken("not a checkpoint: %v", err)
		}
		for subject, h := range cp.Heads {
			c := chains[subject]
			if c == nil {
				continue // the whole chain is gone: retention removed it, nothing to check
			}
			switch {
			case h.N > c.last.N:
				return nil, broken("it names %s's head n %d, but the chain ends at n %d: records after it were removed", subject, h.N, c.last.N)
			case h.N+1 == c.first.N && h.Hash != c.first.Prev:
				return nil, broken("it names %s's head n %d hash %s, but the next remaining record's prev is %s", subject, h.N, h.Hash, c.first.Prev)
			case h.N >= c.first.N && c.hashes[h.N] != h.Hash:
				return nil, broken("it names %s's head n %d hash %s, but the record n %d hashes to %s", subject, h.N, h.Hash, h.N, c.hashes[h.N])
			case c.first.N > 1 && h.N+1 >= c.first.N:
				out[subject] = CheckpointRef{Seq: cr.Seq, Time: cr.Time, N: h.N}
			}
		}
	}
	return out, nil
}
