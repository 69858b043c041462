package auditchain

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
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
	Hash string    `json:"hash"` // and its hash
}

// BreakCheckpoint: a checkpoint record cannot be read, or names a head its chain's
// remaining records contradict (another hash at that position, or a position past the
// chain's end: records after it were removed).
const BreakCheckpoint Reason = "checkpoint"

// ErrCheckpointInvalid matches (errors.Is) a [*BreakError] of reason [BreakCheckpoint]: a
// checkpoint that does not verify, or names a head its chain contradicts.
var ErrCheckpointInvalid = errors.New("auditchain: a checkpoint does not verify")

// ErrCheckpointMissing matches (errors.Is) an [*UnanchoredError]: a chain starts past its
// first record and no checkpoint links to it, so nothing vouches for where it starts.
var ErrCheckpointMissing = errors.New("auditchain: no checkpoint vouches for a cut chain")

// Is makes a checkpoint's break match [ErrCheckpointInvalid].
func (e *BreakError) Is(target error) bool {
	return target == ErrCheckpointInvalid && e.Reason == BreakCheckpoint
}

// UnanchoredError names the chains that start past their first record with no checkpoint
// linking to them (subject: its first n).
type UnanchoredError struct {
	Chains map[string]uint64 `json:"chains"`
}

func (e *UnanchoredError) Error() string {
	subjects := make([]string, 0, len(e.Chains))
	for s := range e.Chains {
		subjects = append(subjects, s)
	}
	sort.Strings(subjects)
	for i, s := range subjects {
		subjects[i] = fmt.Sprintf("%s from n %d", s, e.Chains[s])
	}
	return fmt.Sprintf("%v: %s", ErrCheckpointMissing, strings.Join(subjects, ", "))
}

// Is makes an UnanchoredError match [ErrCheckpointMissing].
func (e *UnanchoredError) Is(target error) bool { return target == ErrCheckpointMissing }

// AnchorCut is [Anchor] for records that must vouch for themselves (an export, a run's
// chain): carried are checkpoint records from outside records (an export's checkpoint
// lines, the checkpoints stored beside a run's chain), each verified on its own (its hash
// and, with pub, its signature; one that fails is a *BreakError of reason
// [BreakCheckpoint]) since they need not be consecutive; then every chain of records
// that starts past n 1, except checkpointSubject's own, must be linked by a checkpoint of
// records or carried, else an *UnanchoredError. Call it after [Verify] succeeded on
// records.
func AnchorCut(records, carried []Record, checkpointSubject string, pub ed25519.PublicKey) (map[string]CheckpointRef, error) {
	for _, cp := range carried {
		l, _ := LinkOf(cp.Header)
		if cp.Subject != checkpointSubject {
			return nil, &BreakError{Seq: cp.Seq, Subject: cp.Subject, N: l.N, Reason: BreakCheckpoint,
				Detail: fmt.Sprintf("a carried checkpoint on %s, not the checkpoint subject %s", cp.Subject, checkpointSubject)}
		}
		if _, err := Verify([]Record{cp}, VerifyOptions{PublicKey: pub}); err != nil {
			var be *BreakError
			if errors.As(err, &be) {
				return nil, &BreakError{Seq: be.Seq, Subject: be.Subject, N: be.N, Reason: BreakCheckpoint, Detail: fmt.Sprintf("the checkpoint does not verify: %s: %s", be.Reason, be.Detail)}
			}
			return nil, err
		}
	}
	all := append(append([]Record(nil), records...), carried...)
	refs, err := Anchor(all, checkpointSubject)
	if err != nil {
		return nil, err
	}
	first := map[string]uint64{}
	for _, r := range records {
		if r.Subject == checkpointSubject {
			continue
		}
		l, err := LinkOf(r.Header)
		if err != nil {
			continue // Verify names an unchained record
		}
		if f, ok := first[r.Subject]; !ok || l.N < f {
			first[r.Subject] = l.N
		}
	}
	missing := map[string]uint64{}
	for s, n := range first {
		if _, ok := refs[s]; n > 1 && !ok {
			missing[s] = n
		}
	}
	if len(missing) > 0 {
		return refs, &UnanchoredError{Chains: missing}
	}
	return refs, nil
}

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
				return nil, broken("it names %s's head n %d, but the chain ends at n %d: records after it were removed (its tail was truncated)", subject, h.N, c.last.N)
			case h.N+1 == c.first.N && h.Hash != c.first.Prev:
				return nil, broken("it names %s's head n %d hash %s, but the next remaining record's prev is %s", subject, h.N, h.Hash, c.first.Prev)
			case h.N >= c.first.N && c.hashes[h.N] != h.Hash:
				return nil, broken("it names %s's head n %d hash %s, but the record n %d hashes to %s", subject, h.N, h.Hash, h.N, c.hashes[h.N])
			case c.first.N > 1 && h.N+1 >= c.first.N:
				out[subject] = CheckpointRef{Seq: cr.Seq, Time: cr.Time, N: h.N, Hash: h.Hash}
			}
		}
	}
	return out, nil
}
