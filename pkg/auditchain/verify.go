package auditchain

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
)

// Record is one stored audit message.
type Record struct {
	Seq     uint64      // stream sequence
	Subject string      // audit subject, the chain it belongs to
	Time    time.Time   // when the stream stored it
	Header  nats.Header // ce-* attributes and the chain headers
	Data    []byte      // the CloudEvent data, exactly as stored
}

// Reason says what broke at a record.
type Reason string

// Reasons of a [BreakError].
const (
	// BreakUnchained: the record has no chain headers (written around the appender).
	BreakUnchained Reason = "unchained"
	// BreakHash: the record's bytes do not hash to its Awaken-Audit-Hash: it was altered.
	BreakHash Reason = "hash"
	// BreakPrev: the record's Awaken-Audit-Prev is not the hash of the record before it.
	BreakPrev Reason = "prev"
	// BreakGap: the record's position does not follow the record before it: a record was
	// deleted, inserted or the records were reordered.
	BreakGap Reason = "gap"
	// BreakSignature: the signature is missing, made by another key, or does not verify.
	BreakSignature Reason = "signature"
)

// BreakError names the first record that breaks its chain and what broke.
type BreakError struct {
	Seq     uint64 `json:"seq"` // stream sequence of the record
	Subject string `json:"subject"`
	N       uint64 `json:"n"` // the record's claimed position (0 when unchained)
	Reason  Reason `json:"reason"`
	Detail  string `json:"detail"`
}

func (e *BreakError) Error() string {
	return fmt.Sprintf("auditchain: record seq %d on %s (n %d) breaks the chain: %s: %s", e.Seq, e.Subject, e.N, e.Reason, e.Detail)
}

// VerifyOptions says what Verify may assume and must check.
type VerifyOptions struct {
	// PublicKey, when set, must have signed every record. Without it signatures are not
	// checked (the hash chain still is) and [Summary.Signed] is false.
	PublicKey ed25519.PublicKey
	// FromStart says the records of each subject start at that subject's first record
	// (a whole run): the first must be N 1 with the zero prev. Without it the first record
	// of each subject is taken as the anchor of the range (its own hash and signature are
	// still checked).
	FromStart bool
}

// Summary is what a successful Verify checked.
type Summary struct {
	Records  int
	Subjects int
	Signed   bool              // every record's signature was checked against the key
	Last     map[string]Link   // the last link of each subject: anchor it elsewhere to detect truncation
	KeyID    string            // id of the key checked, if any
	First    map[string]uint64 // the first N seen on each subject
}

// Verify checks records (in any order: they are grouped by subject and ordered by stream
// sequence, which is the order the chain must follow). It returns a *BreakError naming the
// record with the lowest stream sequence among the first break of every subject.
func Verify(records []Record, opts VerifyOptions) (*Summary, error) {
	sorted := append([]Record(nil), records...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Seq < sorted[j].Seq })
	type head struct {
		n    uint64
		hash string
	}
	heads := map[string]*head{}
	sum := &Summary{Records: len(sorted), Last: map[string]Link{}, First: map[string]uint64{}, Signed: opts.PublicKey != nil}
	if opts.PublicKey != nil {
		sum.KeyID = KeyID(opts.PublicKey)
	}
	var first *BreakError
	broken := map[string]bool{}
	fail := func(r Record, n uint64, reason Reason, format string, args ...any) {
		broken[r.Subject] = true
		if first == nil || r.Seq < first.Seq {
			first = &BreakError{Seq: r.Seq, Subject: r.Subject, N: n, Reason: reason, Detail: fmt.Sprintf(format, args...)}
		}
	}
	for _, r := range sorted {
		if broken[r.Subject] {
			continue
		}
		l, err := LinkOf(r.Header)
		if err != nil {
			fail(r, 0, BreakUnchained, "%v", err)
			continue
		}
		sum256 := Hash(r.Subject, l.N, l.Prev, r.Header, r.Data)
		if got := hex.EncodeToString(sum256[:]); got != l.Hash {
			fail(r, l.N, BreakHash, "content hashes to %s, header says %s", got, l.Hash)
			continue
		}
		if opts.PublicKey != nil {
			sig, err := hex.DecodeString(l.Sig)
			switch {
			case l.Sig == "":
				fail(r, l.N, BreakSignature, "unsigned, key %s expected", sum.KeyID)
				continue
			case err != nil || !ed25519.Verify(opts.PublicKey, sum256[:], sig):
				fail(r, l.N, BreakSignature, "signature (key id %q) does not verify with key %s", l.Key, sum.KeyID)
				continue
			}
		}
		h := heads[r.Subject]
		switch {
		case h == nil && opts.FromStart && l.N != 1:
			fail(r, l.N, BreakGap, "the subject's first record is n %d, not 1: earlier records are missing", l.N)
			continue
		case h == nil && l.N == 1 && l.Prev != ZeroHash:
			fail(r, l.N, BreakPrev, "the first record's prev is %s, not the zero hash", l.Prev)
			continue
		case h != nil && l.N != h.n+1:
			fail(r, l.N, BreakGap, "follows n %d: records deleted, inserted or reordered", h.n)
			continue
		case h != nil && l.Prev != h.hash:
			fail(r, l.N, BreakPrev, "prev %s is not the hash %s of the record before it", l.Prev, h.hash)
			continue
		}
		if h == nil {
			h = &head{}
			heads[r.Subject] = h
			sum.First[r.Subject] = l.N
		}
		h.n, h.hash = l.N, l.Hash
		sum.Last[r.Subject] = l
	}
	seen := map[string]bool{}
	for _, r := range sorted {
		seen[r.Subject] = true
	}
	sum.Subjects = len(seen)
	if first != nil {
		return sum, first
	}
	return sum, nil
}
