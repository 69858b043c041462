// Package state is a typed, JSON-encoded key-value store over a JetStream bucket with
// compare-and-swap updates. Every durable record of awaken (batches, calls, tickets) moves
// only through [Store.Update] or [Store.UpdateAt], so two services — or two deliveries of
// the same message — can never both apply a transition from the same revision.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotFound: the key has no current value (never written, or deleted).
	ErrNotFound = errors.New("state: key not found")
	// ErrExists: Create found the key already present.
	ErrExists = errors.New("state: key already exists")
	// ErrConflict: the key's revision is not the expected one (another writer won), or
	// Update gave up after its retry budget.
	ErrConflict = errors.New("state: revision conflict")
	// ErrIncomplete: a batch read ended before the server sent every answer (it timed out).
	ErrIncomplete = errors.New("state: incomplete batch read")
	// ErrNoChange is returned by an Update function to say "nothing to write"; Update then
	// returns the current value and revision without writing.
	ErrNoChange = errors.New("state: no change")
	// ErrNoChangeOnLeader is ErrNoChange for a decision a replica behind the latest write
	// could make wrongly (a refusal, "not mine"): Update first confirms it on the value the
	// stream leader holds, running fn again there, and only then returns as for ErrNoChange.
	ErrNoChangeOnLeader = fmt.Errorf("%w, as the stream leader confirms", ErrNoChange)
)

// Default retry budget of Update.
const (
	DefaultMaxAttempts = 100
	maxBackoff         = 50 * time.Millisecond
)

// DefaultRequestTimeout bounds each read and write request of a Store. A request whose
// reply is lost — sent to a bucket's leader that stopped before answering — is otherwise
// bounded only by the caller's context: in the 3-node cluster test a batcher's write of a
// run record waited out its handler's whole one-minute deadline after the leader's node
// stopped, holding its batch that long. Bounded, the request fails after this long and
// the caller's own retry (a redelivery) sends it to the new leader. Far above a healthy
// round trip, well below the consumers' 30 s ack wait.
const DefaultRequestTimeout = 10 * time.Second

// Entry is one current value of a key, as returned by List.
type Entry[T any] struct {
	Key      string
	Value    T
	Revision uint64
	Created  time.Time
}

// Option configures a Store.
type Option func(*options)

type options struct {
	maxAttempts    int
	requestTimeout time.Duration
	js             jetstream.JetStream
}

// WithRequestTimeout bounds each read and write request (default [DefaultRequestTimeout]).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.requestTimeout = d
		}
	}
}

// WithJetStream gives the store the JetStream context of its bucket, which [Store.GetMany]
// needs to read many keys in one request.
func WithJetStream(js jetstream.JetStream) Option {
	return func(o *options) { o.js = js }
}

// WithMaxAttempts bounds the read-modify-write rounds of Update (default
// [DefaultMaxAttempts]); past it Update returns an error matching ErrConflict.
func WithMaxAttempts(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxAttempts = n
		}
	}
}

// Store is a typed view of one bucket. It is stateless beyond its bucket handle and safe
// for concurrent use; consistency comes from the server's revision checks, not from
// locks, so it holds across processes.
type Store[T any] struct {
	// parts are the buckets of the store's partitions, partition 0 first; route names the
	// partition of a key (nil: one partition).
	parts []jetstream.KeyValue
	route Route
	opts  options
	// announce, when set, makes a revision a work item (see [Store.WithAnnounce]).
	announce Announce[T]
	// ttl, when set, gives a revision a per-message TTL (see [Store.WithTTL]).
	ttl func(v *T) time.Duration
	// record is set when T is one of awaken's stored records, whose format version is
	// stamped and checked (contracts/format.go).
	record bool
}

// WithTTL returns a copy of s whose writes (Create, UpdateAt, Update) carry the
// per-message TTL ttl returns for the value written (none when it returns 0): the server
// removes that revision, and leaves a delete marker in its place, once it is that old. A
// TTL removes only the revision that carries it, so the bucket must keep one revision per
// key (history 1), or the key would read as its previous revision afterwards; the bucket
// must allow per-message TTLs (a limit marker TTL). It needs [WithJetStream].
//
// As with announcements, deriving the TTL from the value in one place means every writer
// of the record gives it the same lifetime: a record expires only in the states ttl says
// may expire.
func (s *Store[T]) WithTTL(ttl func(v *T) time.Duration) *Store[T] {
	c := *s
	c.ttl = ttl
	return &c
}

// Announce returns the headers that make the revision v of key a work item for the
// consumers of the bucket's stream — the CloudEvents binary-mode attributes (ce-*) naming
// the transition, and the trace context — or nil when the revision hands nothing on and is
// written as a plain key-value update. It runs once per write, with the value about to be
// written, and must not block.
type Announce[T any] func(ctx context.Context, key string, v *T) nats.Header

// WithAnnounce returns a copy of s whose writes (Create, UpdateAt, Update) carry the
// headers announce returns for the value written. Such a write is still a key-value
// write: the value is the plain record JSON on $KV.<bucket>.<key>, and gets and watchers
// read it unchanged; the compare-and-swap is the same Nats-Expected-Last-Subject-Sequence
// check the key-value API sends. It needs [WithJetStream].
//
// Deriving the headers from the value, in one place, rather than having every writer pass
// them means no writer of a transition that hands work on can forget to: the revision's
// type is a function of the record's state.
func (s *Store[T]) WithAnnounce(announce Announce[T]) *Store[T] {
	c := *s
	c.announce = announce
	return &c
}

// NewStore returns a Store of T values over kv.
func NewStore[T any](kv jetstream.KeyValue, opts ...Option) *Store[T] {
	return NewPartitionedStore[T]([]jetstream.KeyValue{kv}, nil, opts...)
}

// Route names the partition of a key, or of a key pattern of [Store.List]: an index of
// the store's buckets, or -1 when a pattern spans every partition (its run token is a
// wildcard).
type Route func(key string) int

// NewPartitionedStore returns a Store of T values over one bucket per partition (parts,
// partition 0 first): every key lives in the bucket route names, so a run's records —
// whose keys all hold the run id — stay in its partition. With one bucket it is NewStore.
func NewPartitionedStore[T any](parts []jetstream.KeyValue, route Route, opts ...Option) *Store[T] {
	o := options{maxAttempts: DefaultMaxAttempts, requestTimeout: DefaultRequestTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	_, record := contracts.RecordFormatOf(reflect.TypeFor[T]())
	if len(parts) < 2 {
		route = nil
	}
	return &Store[T]{parts: parts, route: route, opts: o, record: record}
}

// Partitions is the number of the store's buckets.
func (s *Store[T]) Partitions() int { return len(s.parts) }

// request bounds one request to the server by the store's request timeout.
func (s *Store[T]) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.requestTimeout)
}

// Bucket returns the name of the underlying bucket.
func (s *Store[T]) Bucket() string { return s.parts[0].Bucket() }

// kvOf is the bucket that holds key: its partition's ([NewPartitionedStore]).
func (s *Store[T]) kvOf(key string) jetstream.KeyValue {
	if s.route == nil {
		return s.parts[0]
	}
	if k := s.route(key); k > 0 && k < len(s.parts) {
		return s.parts[k]
	}
	return s.parts[0]
}

// Get returns the current value of key and its revision, or ErrNotFound.
func (s *Store[T]) Get(ctx context.Context, key string) (T, uint64, error) {
	var zero T
	rctx, cancel := s.request(ctx)
	e, err := s.kvOf(key).Get(rctx, key)
	cancel()
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return zero, 0, fmt.Errorf("%w: %s/%s", ErrNotFound, s.kvOf(key).Bucket(), key)
		}
		return zero, 0, fmt.Errorf("state: get %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	v, err := s.decode(key, e.Value())
	if err != nil {
		return zero, 0, err
	}
	return v, e.Revision(), nil
}

// maxKeysPerBatchGet stays under the server's limit of 1,024 messages per batch get.
const maxKeysPerBatchGet = 1000

// GetMany returns the current values of keys, each with its revision; a key without a
// current value is absent from the result. With [WithJetStream] it reads them with one
// batch direct get per thousand keys (the last message of each key's subject) instead of
// one request per key.
//
// Like Get, it may be answered by any replica of the bucket's stream, so a value may be
// older than the latest write; callers that act on an absence or on a value that can
// still change must confirm it with a consistent read (List).
func (s *Store[T]) GetMany(ctx context.Context, keys []string) (map[string]Entry[T], error) {
	out := make(map[string]Entry[T], len(keys))
	if s.opts.js == nil {
		for _, k := range keys {
			v, rev, err := s.Get(ctx, k)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[k] = Entry[T]{Key: k, Value: v, Revision: rev}
		}
		return out, nil
	}
	if len(s.parts) > 1 {
		byPart := make(map[jetstream.KeyValue][]string)
		for _, k := range keys {
			kv := s.kvOf(k)
			byPart[kv] = append(byPart[kv], k)
		}
		for kv, ks := range byPart {
			if err := s.getMany(ctx, kv, ks, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if err := s.getMany(ctx, s.parts[0], keys, out); err != nil {
		return nil, err
	}
	return out, nil
}

// getMany reads keys, all of bucket kv, into out.
func (s *Store[T]) getMany(ctx context.Context, kv jetstream.KeyValue, keys []string, out map[string]Entry[T]) error {
	prefix := "$KV." + kv.Bucket() + "."
	for chunk := range slices.Chunk(keys, maxKeysPerBatchGet) {
		subjects := make([]string, len(chunk))
		for i, k := range chunk {
			subjects[i] = prefix + k
		}
		rctx, cancel := s.request(ctx)
		var decodeErr error
		complete, err := getLastMsgsFor(rctx, s.opts.js, "KV_"+kv.Bucket(), subjects, func(m *jetstream.RawStreamMsg) error {
			if isDeletion(m.Header) {
				return nil
			}
			key := strings.TrimPrefix(m.Subject, prefix)
			v, err := s.decode(key, m.Data)
			if err != nil {
				decodeErr = err
				return err
			}
			out[key] = Entry[T]{Key: key, Value: v, Revision: m.Sequence, Created: m.Time}
			return nil
		})
		cancel()
		if decodeErr != nil {
			return decodeErr
		}
		// The read also ends quietly when the answer stops coming (a timeout), so
		// completeness is checked: the server counts down the messages still to come, and
		// says so when there are none at all.
		if errors.Is(err, errNoMessages) {
			continue // none of the keys has a value
		}
		if err != nil {
			return fmt.Errorf("state: get %d keys of %s: %w", len(chunk), kv.Bucket(), err)
		}
		if !complete {
			return fmt.Errorf("state: get %d keys of %s: %w", len(chunk), kv.Bucket(), ErrIncomplete)
		}
	}
	return nil
}

// The header and values with which JetStream key-value marks a deleted or purged key.
const (
	kvOperationHeader = "KV-Operation"
	kvOpDelete        = "DEL"
	kvOpPurge         = "PURGE"
)

// isDeletion reports whether a stored revision with hdr marks its key deleted: a
// key-value delete or purge, or the marker the server leaves where a revision expired
// (per-message TTL or max age), which carries a marker reason and no KV operation.
func isDeletion(hdr nats.Header) bool {
	op := hdr.Get(kvOperationHeader)
	return op == kvOpDelete || op == kvOpPurge || hdr.Get(jetstream.MarkerReasonHeader) != ""
}

// Create writes v only if key has no current value; otherwise it returns ErrExists.
func (s *Store[T]) Create(ctx context.Context, key string, v T) (uint64, error) {
	b, err := s.encode(key, v)
	if err != nil {
		return 0, err
	}
	rev, err := s.createRaw(ctx, key, b, s.headers(ctx, key, &v))
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return 0, fmt.Errorf("%w: %s/%s", ErrExists, s.kvOf(key).Bucket(), key)
		}
		return 0, fmt.Errorf("state: create %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	return rev, nil
}

// CreateFirst writes v to key only if key never had a revision: unlike [Store.Create],
// a delete or purge marker — a value that expired or was removed — counts as one (the
// marker's own TTL bounds how long it does). A key with any revision is ErrExists.
func (s *Store[T]) CreateFirst(ctx context.Context, key string, v T) (uint64, error) {
	if s.opts.js == nil {
		return 0, fmt.Errorf("state: create %s/%s: a first-revision create needs the JetStream context", s.kvOf(key).Bucket(), key)
	}
	b, err := s.encode(key, v)
	if err != nil {
		return 0, err
	}
	rev, err := s.publish(ctx, key, b, s.headers(ctx, key, &v), 0)
	if errors.Is(err, ErrConflict) {
		return 0, fmt.Errorf("%w: %s/%s", ErrExists, s.kvOf(key).Bucket(), key)
	}
	if err != nil {
		return 0, fmt.Errorf("state: create %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	return rev, nil
}

// headers returns the announcement and TTL headers of the write of v, or nil.
func (s *Store[T]) headers(ctx context.Context, key string, v *T) nats.Header {
	if s.opts.js == nil {
		return nil
	}
	var hdr nats.Header
	if s.announce != nil {
		hdr = s.announce(ctx, key, v)
	}
	if s.ttl != nil {
		if d := s.ttl(v); d > 0 {
			with := make(nats.Header, len(hdr)+1)
			for k, vs := range hdr {
				with[k] = vs
			}
			with.Set(jetstream.MsgTTLHeader, d.String())
			hdr = with
		}
	}
	return hdr
}

// createRaw writes b to key only if key has no current value: like the key-value Create,
// an expected last subject sequence of 0, and, when the key's last revision is a delete
// or purge marker, of that marker's revision. A key with a value is ErrConflict.
func (s *Store[T]) createRaw(ctx context.Context, key string, b []byte, hdr nats.Header) (uint64, error) {
	if hdr == nil {
		rctx, cancel := s.request(ctx)
		rev, err := s.kvOf(key).Create(rctx, key, b)
		cancel()
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("%w: %s/%s", ErrConflict, s.kvOf(key).Bucket(), key)
		}
		return rev, err
	}
	rev, err := s.publish(ctx, key, b, hdr, 0)
	if !errors.Is(err, ErrConflict) {
		return rev, err
	}
	rctx, cancel := s.request(ctx)
	marker, deleted, rerr := readLast(rctx, s.opts.js.Conn(), s.kvOf(key).Bucket(), key)
	cancel()
	if rerr != nil || !deleted {
		return 0, err
	}
	return s.publish(ctx, key, b, hdr, marker.Sequence)
}

// publish writes b with hdr as the revision of key that follows rev (0: the key has no
// revision at all), as a JetStream publish on the key's subject. A wrong last sequence —
// another writer won — is ErrConflict. hdr is not modified.
//
// No Nats-Msg-Id is sent: the bucket's stream deduplicates by it, and a second writer
// whose revision carried the same id inside the duplicate window would be told
// "duplicate" with the first writer's sequence — a lost compare-and-swap read as a won
// one. The expected sequence is the only guard a record needs.
func (s *Store[T]) publish(ctx context.Context, key string, b []byte, hdr nats.Header, rev uint64) (uint64, error) {
	m := &nats.Msg{Subject: "$KV." + s.kvOf(key).Bucket() + "." + key, Header: make(nats.Header, len(hdr)+1), Data: b}
	for k, v := range hdr {
		if k == jetstream.MsgIDHeader {
			continue
		}
		m.Header[k] = v
	}
	rctx, cancel := s.request(ctx)
	defer cancel()
	ack, err := s.opts.js.PublishMsg(rctx, m, jetstream.WithExpectLastSequencePerSubject(rev))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, fmt.Errorf("%w: %s/%s at revision %d", ErrConflict, s.kvOf(key).Bucket(), key, rev)
		}
		return 0, fmt.Errorf("state: write %s/%s at revision %d: %w", s.kvOf(key).Bucket(), key, rev, err)
	}
	observed(ctx, s.kvOf(key).Bucket(), key, hdr)
	return ack.Sequence, nil
}

// Put writes v unconditionally. Use it only for values no one else transitions.
func (s *Store[T]) Put(ctx context.Context, key string, v T) (uint64, error) {
	b, err := s.encode(key, v)
	if err != nil {
		return 0, err
	}
	rctx, cancel := s.request(ctx)
	rev, err := s.kvOf(key).Put(rctx, key, b)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("state: put %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	return rev, nil
}

// UpdateAt writes v only if key's current revision is rev; otherwise it returns
// ErrConflict.
func (s *Store[T]) UpdateAt(ctx context.Context, key string, v T, rev uint64) (uint64, error) {
	b, err := s.encode(key, v)
	if err != nil {
		return 0, err
	}
	return s.updateRaw(ctx, key, b, rev, s.headers(ctx, key, &v))
}

func (s *Store[T]) updateRaw(ctx context.Context, key string, b []byte, rev uint64, hdr nats.Header) (uint64, error) {
	if hdr != nil {
		return s.publish(ctx, key, b, hdr, rev)
	}
	rctx, cancel := s.request(ctx)
	nrev, err := s.kvOf(key).Update(rctx, key, b, rev)
	cancel()
	if err != nil {
		// Not ErrKeyExists: it matches every wrong-last-sequence code and would hide the
		// difference platform.md §B warns about.
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("%w: %s/%s at revision %d", ErrConflict, s.kvOf(key).Bucket(), key, rev)
		}
		return 0, fmt.Errorf("state: update %s/%s at revision %d: %w", s.kvOf(key).Bucket(), key, rev, err)
	}
	return nrev, nil
}

// Update is the compare-and-swap loop every state transition goes through. It reads key,
// calls fn with a freshly decoded copy of the current value (exists false and the zero
// value when absent), and writes the result with Create (absent) or UpdateAt (present).
// When another writer got there first it re-reads and calls fn again, with jittered
// back-off, up to the retry budget; fn must therefore be a pure function of the value it
// is given.
//
// If fn returns ErrNoChange (possibly wrapped) nothing is written and Update returns the
// current value and revision (zero and 0 when absent); ErrNoChangeOnLeader does the same
// once fn has said so again on the leader's value. Any other fn error aborts the loop
// and is returned wrapped. On success Update returns the written value and its revision.
//
// The first read is a KV get, which in a cluster any replica may answer, possibly from
// behind the latest write. That costs nothing when fn accepts the value (the write is
// checked against the revision read, so a stale one only loses the swap), but an error fn
// returns is final: it is therefore confirmed on the value the stream leader holds
// ([Store.GetFromLeader], with [WithJetStream]) before it is returned — a publisher that
// read a batch still open after it had finalized it dead-lettered its output as "not
// finalized" (make chaos-cluster). After a lost swap the next read goes to the leader too.
func (s *Store[T]) Update(ctx context.Context, key string, fn func(cur *T, exists bool) error) (T, uint64, error) {
	var zero T
	fromLeader := false
	for attempt := 1; ; attempt++ {
		cur, raw, rev, exists, err := s.read(ctx, key, fromLeader)
		if err != nil {
			return zero, 0, fmt.Errorf("state: update %s/%s: read: %w", s.kvOf(key).Bucket(), key, err)
		}

		if ferr := fn(&cur, exists); ferr != nil {
			if errors.Is(ferr, ErrNoChangeOnLeader) && !fromLeader && s.opts.js != nil {
				fromLeader = true
				attempt--
				continue
			}
			if errors.Is(ferr, ErrNoChange) {
				if !exists {
					return zero, 0, nil
				}
				// fn may have modified cur before giving up: return the stored value.
				v, derr := s.decode(key, raw)
				return v, rev, derr
			}
			if !fromLeader && s.opts.js != nil {
				fromLeader = true
				attempt--
				continue
			}
			return zero, 0, fmt.Errorf("state: update %s/%s: %w", s.kvOf(key).Bucket(), key, ferr)
		}

		b, err := s.encode(key, cur)
		if err != nil {
			return zero, 0, err
		}
		var nrev uint64
		hdr := s.headers(ctx, key, &cur)
		if exists {
			nrev, err = s.updateRaw(ctx, key, b, rev, hdr)
		} else {
			nrev, err = s.createRaw(ctx, key, b, hdr)
			if errors.Is(err, ErrConflict) {
				err = fmt.Errorf("%w: %s/%s created concurrently", ErrConflict, s.kvOf(key).Bucket(), key)
			}
		}
		if err == nil {
			return cur, nrev, nil
		}
		if !errors.Is(err, ErrConflict) {
			return zero, 0, fmt.Errorf("state: update %s/%s: write: %w", s.kvOf(key).Bucket(), key, err)
		}
		if attempt >= s.opts.maxAttempts {
			return zero, 0, fmt.Errorf("state: update %s/%s: gave up after %d attempts: %w", s.kvOf(key).Bucket(), key, attempt, err)
		}
		fromLeader = s.opts.js != nil
		if err := backoff(ctx, attempt); err != nil {
			return zero, 0, fmt.Errorf("state: update %s/%s: %w", s.kvOf(key).Bucket(), key, err)
		}
	}
}

// read returns the current value of key for Update: its decoded value, raw bytes and
// revision, and whether it exists; from the stream leader when fromLeader is set.
func (s *Store[T]) read(ctx context.Context, key string, fromLeader bool) (cur T, raw []byte, rev uint64, exists bool, err error) {
	rctx, cancel := s.request(ctx)
	defer cancel()
	if fromLeader {
		m, err := ReadFromLeader(rctx, s.opts.js.Conn(), s.kvOf(key).Bucket(), key)
		switch {
		case errors.Is(err, ErrNotFound):
			return cur, nil, 0, false, nil
		case err != nil:
			return cur, nil, 0, false, err
		}
		raw, rev = m.Data, m.Sequence
	} else {
		e, err := s.kvOf(key).Get(rctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return cur, nil, 0, false, nil
		case err != nil:
			return cur, nil, 0, false, err
		}
		raw, rev = e.Value(), e.Revision()
	}
	cur, err = s.decode(key, raw)
	return cur, raw, rev, err == nil, err
}

// backoff waits a random time up to min(maxBackoff, 1ms·2^attempt), so that writers that
// collided spread out instead of colliding again.
func backoff(ctx context.Context, attempt int) error {
	ceiling := min(maxBackoff, time.Millisecond<<min(attempt, 16))
	return ctxsleep.Sleep(ctx, rand.N(ceiling)+1)
}

// Delete removes key. With rev 0 the delete is unconditional; otherwise it happens only if
// key's current revision is rev, else ErrConflict.
func (s *Store[T]) Delete(ctx context.Context, key string, rev uint64) error {
	var opts []jetstream.KVDeleteOpt
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	rctx, cancel := s.request(ctx)
	defer cancel()
	if err := s.kvOf(key).Delete(rctx, key, opts...); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("%w: delete %s/%s at revision %d", ErrConflict, s.kvOf(key).Bucket(), key, rev)
		}
		return fmt.Errorf("state: delete %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	return nil
}

// List returns the current value of every key matching filter (a NATS subject pattern
// over keys, e.g. "run-7.3.*"; empty means all keys). It reads them with one watcher that
// delivers the latest value of each key and then the end-of-initial-values marker, so it
// costs one round of messages rather than one request per key. Deleted keys are skipped.
func (s *Store[T]) List(ctx context.Context, filter string) (map[string]Entry[T], error) {
	if filter == "" {
		filter = jetstream.AllKeys
	}
	out := make(map[string]Entry[T])
	parts := s.parts
	if s.route != nil {
		if k := s.route(filter); k >= 0 && k < len(s.parts) {
			parts = s.parts[k : k+1]
		}
	}
	for _, kv := range parts {
		if err := s.list(ctx, kv, filter, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// list reads the keys of bucket kv matching filter into out.
func (s *Store[T]) list(ctx context.Context, kv jetstream.KeyValue, filter string, out map[string]Entry[T]) error {
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("state: list %s/%s: %w", kv.Bucket(), filter, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("state: list %s/%s: watcher closed early", kv.Bucket(), filter)
			}
			if e == nil { // end of the initial values
				return nil
			}
			v, err := s.decode(e.Key(), e.Value())
			if err != nil {
				return err
			}
			out[e.Key()] = Entry[T]{Key: e.Key(), Value: v, Revision: e.Revision(), Created: e.Created()}
		case <-ctx.Done():
			return fmt.Errorf("state: list %s/%s: %w", kv.Bucket(), filter, ctx.Err())
		}
	}
}

// encode renders v as its bucket stores it: a record type of awaken's with its format
// version stamped ([contracts.EncodeRecord]), any other type as plain JSON.
func (s *Store[T]) encode(key string, v T) ([]byte, error) {
	var b []byte
	var err error
	if s.record {
		b, err = contracts.EncodeRecord(&v)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("state: encode %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	return b, nil
}

// decode reads a stored value; a record type of awaken's only in a format version this
// version reads ([contracts.DecodeRecord]: a *contracts.Rejection otherwise).
func (s *Store[T]) decode(key string, b []byte) (T, error) {
	var v T
	var err error
	if s.record {
		err = contracts.DecodeRecord(b, &v)
	} else {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		return v, fmt.Errorf("state: decode %s/%s: %w", s.kvOf(key).Bucket(), key, err)
	}
	return v, nil
}
