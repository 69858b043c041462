// Package auditlog appends records to the tamper-evident audit trail: each record on an
// audit subject is sealed (pkg/auditchain) as the next link of its subject's chain and
// stored with a compare-and-swap on the subject's last sequence, so two writers (gate
// replicas, api replicas) can never fork a chain.
package auditlog

import (
	"container/list"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// JetStream API error codes the appender tells apart.
const (
	errCodeWrongLastSubjectSeq = 10071 // Nats-Expected-Last-Subject-Sequence did not match
	// errCodeSubjectInFlight: a clustered stream refuses an expected-sequence publish while
	// another write on the subject is proposed but not applied ("wrong last sequence",
	// without the sequence). It is a lost race like 10071, resolved once that write lands.
	errCodeSubjectInFlight = 10164
)

// headerExpectedLastSubjectSeq is the compare-and-swap header of an append.
const headerExpectedLastSubjectSeq = "Nats-Expected-Last-Subject-Sequence"

// DefaultCacheSize is how many subjects' chain heads an appender remembers: enough for the
// runs a gate decides at once; a subject it forgot costs one leader read at its next append.
const DefaultCacheSize = 4096

// maxAttempts bounds the compare-and-swap retries of one append: each lost race re-reads
// the head, so only a subject written faster than this process can read it exhausts them.
const maxAttempts = 16

// ErrContended: an append lost the compare-and-swap maxAttempts times in a row.
var ErrContended = errors.New("auditlog: the chain head kept moving")

// ErrForeignDuplicate: the stream answered an append "duplicate", but the message stored
// under the record's id is not the record: another writer of the stream published under
// that id first. The record is not stored; the stream takes it only once the duplicate
// window has passed the foreign message.
var ErrForeignDuplicate = errors.New("auditlog: another message is stored under the record's id")

// head is the last record of a subject as this appender knows it.
type head struct {
	subject string
	known   bool   // false: not read yet (or uncertain after a failed publish)
	seq     uint64 // stream sequence of the last record
	n       uint64
	hash    string
	mu      sync.Mutex // serialises this process's appends on the subject
	elem    *list.Element
}

// Appender appends sealed records to the audit stream. It is safe for concurrent use;
// appends on different subjects run in parallel, appends on one subject one after another.
type Appender struct {
	js     jetstream.JetStream
	stream string
	prefix string // subjects it covers: prefix + anything
	key    ed25519.PrivateKey

	mu    sync.Mutex
	heads map[string]*head
	lru   *list.List // most recently used at the front
	size  int
}

// SubjectPrefix is the common prefix of every audit subject of names' partition (its
// audit stream's subjects, awaken.audit. in partition 0): each subject under it is one
// chain of the trail.
func SubjectPrefix(names contracts.Names) string { return names.AuditPrefix() }

// Partitioned is the chain of every partition's audit stream: one [Appender] per
// partition, each covering its partition's subjects, so a record is appended to the
// audit stream of its run's partition.
type Partitioned []*Appender

// NewPartitioned returns the appenders of every partition of names, signing with key.
func NewPartitioned(js jetstream.JetStream, names contracts.Names, key ed25519.PrivateKey) Partitioned {
	var p Partitioned
	for _, pn := range names.EachPartition() {
		p = append(p, New(js, pn.AuditStream(), SubjectPrefix(pn), key))
	}
	return p
}

// Covers reports whether subject is an audit subject of any partition.
func (p Partitioned) Covers(subject string) bool { return p.of(subject) != nil }

// Append appends msg to the chain of its subject, in its partition's audit stream.
func (p Partitioned) Append(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	a := p.of(msg.Subject)
	if a == nil {
		return nil, fmt.Errorf("auditlog: %s is no audit subject", msg.Subject)
	}
	return a.Append(ctx, msg)
}

func (p Partitioned) of(subject string) *Appender {
	for _, a := range p {
		if a.Covers(subject) {
			return a
		}
	}
	return nil
}

// New returns an appender for the audit stream stream, covering the subjects under
// prefix (e.g. "awaken.audit."), signing with key (nil: chained but unsigned).
func New(js jetstream.JetStream, stream, prefix string, key ed25519.PrivateKey) *Appender {
	return &Appender{js: js, stream: stream, prefix: prefix, key: key, heads: map[string]*head{}, lru: list.New(), size: DefaultCacheSize}
}

// WithCacheSize sets how many chain heads the appender remembers (tests use small ones).
func (a *Appender) WithCacheSize(n int) *Appender { a.size = max(n, 1); return a }

// PublicKey is the key that verifies the appender's signatures (nil when unsigned).
func (a *Appender) PublicKey() ed25519.PublicKey {
	if a.key == nil {
		return nil
	}
	return a.key.Public().(ed25519.PublicKey)
}

// Covers reports whether subject is an audit subject the appender chains.
func (a *Appender) Covers(subject string) bool { return strings.HasPrefix(subject, a.prefix) }

// head returns the cache entry of subject, evicting the least recently used beyond size.
// An evicted entry still held by an append stays valid for it; the next append on its
// subject starts a new entry and re-reads the head.
func (a *Appender) head(subject string) *head {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h, ok := a.heads[subject]; ok {
		a.lru.MoveToFront(h.elem)
		return h
	}
	h := &head{subject: subject}
	h.elem = a.lru.PushFront(h)
	a.heads[subject] = h
	for a.lru.Len() > a.size {
		old := a.lru.Remove(a.lru.Back()).(*head)
		delete(a.heads, old.subject)
	}
	return h
}

// Append seals msg as the next record of its subject and stores it. A head it does not
// know is first taken as empty (a new run's first record costs no read); a lost
// compare-and-swap re-reads the head from the stream leader and re-seals. A duplicate
// (msg's Nats-Msg-Id already stored inside the duplicate window) is answered by the
// stream before the compare-and-swap and appends nothing: the returned ack has Duplicate.
func (a *Appender) Append(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	h := a.head(msg.Subject)
	h.mu.Lock()
	defer h.mu.Unlock()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if !h.known {
			h.seq, h.n, h.hash = 0, 0, auditchain.ZeroHash
		}
		l := auditchain.Seal(msg, h.n+1, h.hash, a.key)
		msg.Header.Set(headerExpectedLastSubjectSeq, strconv.FormatUint(h.seq, 10))
		ack, err := a.js.PublishMsg(ctx, msg)
		switch {
		case err == nil && ack.Duplicate:
			// Nothing was stored: the head is what it was (or, if unknown, still unknown).
			if err := a.checkOwn(ctx, msg, ack.Sequence); err != nil {
				return nil, err
			}
			return ack, nil
		case err == nil:
			h.known, h.seq, h.n, h.hash = true, ack.Sequence, l.N, l.Hash
			return ack, nil
		case isWrongLastSeq(err):
			if err := backoff(ctx, attempt); err != nil {
				h.known = false
				return nil, fmt.Errorf("auditlog: append to %s: %w", msg.Subject, err)
			}
			if err := a.readHead(ctx, h); err != nil {
				h.known = false
				return nil, err
			}
		default:
			// The record may or may not be stored: forget the head, the next append re-reads
			// it (and a retry of this one is a duplicate if it was stored).
			h.known = false
			return nil, fmt.Errorf("auditlog: append to %s: %w", msg.Subject, err)
		}
	}
	h.known = false
	return nil, fmt.Errorf("%w: %s after %d attempts", ErrContended, msg.Subject, maxAttempts)
}

// The CloudEvent headers (binary content mode) that make a stored message this record.
var ownHeaders = []string{"ce-id", "ce-type", "ce-source"}

// checkOwn reads back the message stored at seq, which the stream answered msg's append
// with as a duplicate, and fails with ErrForeignDuplicate unless it is msg's record: on
// msg's subject, with its CloudEvent id, type and source, a chain link its content hashes
// to and, when the appender signs, a signature of its key. The stream deduplicates ids
// across every subject it holds, so without this read a message another writer stored
// first under the id would be taken for the record, and the record would never be stored.
// Only duplicates pay the read: a retried append after a crash or a lost acknowledgement.
func (a *Appender) checkOwn(ctx context.Context, msg *nats.Msg, seq uint64) error {
	stored, err := state.ReadSeqFromLeader(ctx, a.js.Conn(), a.stream, seq)
	if err != nil {
		return fmt.Errorf("auditlog: read back the message stored under the id of %s (seq %d): %w", msg.Subject, seq, err)
	}
	foreign := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %s at seq %d: %s", ErrForeignDuplicate, msg.Subject, msg.Header.Get("ce-id"), seq, fmt.Sprintf(format, args...))
	}
	if stored.Subject != msg.Subject {
		return foreign("stored on %s", stored.Subject)
	}
	for _, h := range ownHeaders {
		if got, want := stored.Header.Get(h), msg.Header.Get(h); got != want {
			return foreign("its %s is %q, not %q", h, got, want)
		}
	}
	rec := auditchain.Record{Seq: stored.Sequence, Subject: stored.Subject, Header: stored.Header, Data: stored.Data}
	if _, err := auditchain.Verify([]auditchain.Record{rec}, auditchain.VerifyOptions{PublicKey: a.PublicKey()}); err != nil {
		return foreign("%v", err)
	}
	return nil
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeWrongLastSubjectSeq || apiErr.ErrorCode == errCodeSubjectInFlight)
}

// backoff waits before the retry after lost race number attempt: not at all after the
// first (the usual loss is a stale cached head, and the leader read fixes it), then 1 ms
// doubling to 32 ms, so a write of another replica still in flight can land.
func backoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	return ctxsleep.Sleep(ctx, time.Millisecond<<min(attempt-1, 5))
}

// readHead sets h to the subject's last record as the stream leader holds it
// ([state.ReadLastFromLeader]): a direct get may be answered by a replica that has not seen
// the last append yet. A last record without chain headers (written around the appender)
// is chained over: the next record restarts at n 1 after it, and verification names the
// unchained record.
func (a *Appender) readHead(ctx context.Context, h *head) error {
	m, err := state.ReadLastFromLeader(ctx, a.js.Conn(), a.stream, h.subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		h.known, h.seq, h.n, h.hash = true, 0, 0, auditchain.ZeroHash
		return nil
	case err != nil:
		return fmt.Errorf("auditlog: read the head of %s: %w", h.subject, err)
	}
	h.known, h.seq = true, m.Sequence
	if l, err := auditchain.LinkOf(m.Header); err == nil {
		h.n, h.hash = l.N, l.Hash
	} else {
		h.n, h.hash = 0, auditchain.ZeroHash
	}
	return nil
}
