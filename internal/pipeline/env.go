// Package pipeline is the shared environment of the awaken services: the typed stores of
// batch, call and ticket records, the publisher, the cache of immutable batch records, the
// deterministic message ids, and the test-only fault hook. Services receive an [*Env] from
// their wiring and never import each other.
package pipeline

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Env is what every service needs. It is safe for concurrent use.
type Env struct {
	Conn   *nats.Conn
	JS     jetstream.JetStream
	Config *config.Config
	Names  contracts.Names
	// Log is the service's logger; it carries the "service" field (internal/wiring/app adds it),
	// so services do not add it again.
	Log zerolog.Logger
	// Service names the service the environment serves (the ce-source of the record
	// revisions it writes, "awaken/{Service}"); internal/wiring/app sets it.
	Service string
	Pub     *bus.Publisher
	// AuditKey signs the audit trail (audit.signing_key_file; nil: unsigned). Records
	// published through Pub on audit subjects are sealed with it.
	AuditKey ed25519.PrivateKey
	Batches  *state.Store[contracts.BatchRecord]
	Calls    *state.Store[contracts.CallRecord]
	Tickets  *state.Store[contracts.ResumeTicket]
	// Runs holds the lifecycle of every run: its active batch and whether it ended.
	Runs *state.Store[contracts.RunRecord]
	// Faults is the test-only fault hook (nil in production). Services reach it only
	// through the effects runtime ([Env.Apply], faults.go).
	Faults FaultHook
	// OnHandOffMismatch, when set, is told of every commit whose stored revisions handed
	// work to other consumers than its writer named ([Commit]); tests fail on it. The
	// mismatch is logged either way.
	OnHandOffMismatch func(HandOffMismatch)
	// Now is the clock (time.Now in production).
	Now func() time.Time
	// Telemetry records the service's metrics and traces; nil records nothing (its
	// methods are nil-safe). Set it with [Env.SetTelemetry] before starting the service.
	Telemetry *telemetry.Telemetry

	cache *batchCache // batch key → *contracts.BatchRecord (immutable part)
	// audit is the chain of every partition's audit stream, the one Pub appends through.
	audit auditlog.Partitioned

	pausesOnce sync.Once
	pauses     *pauseView // the executors' in-memory watch of the pauses bucket
}

// NewEnv binds the stores of an ensured topology. EnsureTopology must have run.
func NewEnv(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg *config.Config, log zerolog.Logger) (*Env, error) {
	names := cfg.Names()
	open := func(name string) (jetstream.KeyValue, error) {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("pipeline: bucket %s: %w", name, err)
		}
		return kv, nil
	}
	tickets, err := open(names.TicketsBucket())
	if err != nil {
		return nil, err
	}
	// The batches, calls and runs buckets exist once per partition; each store routes a
	// key to the bucket of its run's partition (the run id is in every key).
	var batches, calls, runs []jetstream.KeyValue
	for _, pn := range names.EachPartition() {
		for _, b := range []struct {
			kvs  *[]jetstream.KeyValue
			name string
		}{{&batches, pn.BatchesBucket()}, {&calls, pn.CallsBucket()}, {&runs, pn.RunsBucket()}} {
			kv, err := open(b.name)
			if err != nil {
				return nil, err
			}
			*b.kvs = append(*b.kvs, kv)
		}
	}
	// A configured signing key that cannot be read refuses the start: an unsigned trail
	// from a host meant to sign would pass for a forgery at every verification.
	auditKey, err := cfg.AuditSigningKey()
	if err != nil {
		return nil, fmt.Errorf("pipeline: audit signing key: %w", err)
	}
	audit := auditlog.NewPartitioned(js, names, auditKey)
	e := &Env{
		Conn: nc, JS: js, Config: cfg, Names: names, Log: log, AuditKey: auditKey,
		// Every record on an audit subject published through Pub is appended to its
		// subject's chain (internal/auditlog), sealed and signed.
		Pub:   bus.NewPublisher(js).WithChain(audit),
		audit: audit,
		// The archive holds finished batches only: each write of a published one expires
		// with the run retention, and its expiry marker drives the sweep of the batch's
		// call and ticket records (the gate's sweeper, services/gate/sweep.go). A batch
		// archived finalized (the claim of the run's next batch replaced it before the
		// publisher published it) carries no TTL: the publisher may be down for longer
		// than the retention, and an expiry then would have its call records swept and
		// the batch never published. The publisher's write that marks it published gives
		// it the retention.
		Batches: state.NewPartitionedStore[contracts.BatchRecord](batches, RunKeyRoute(names), state.WithJetStream(js)).WithTTL(func(b *contracts.BatchRecord) time.Duration {
			if b.Phase != contracts.BatchPhasePublished {
				return 0
			}
			return cfg.RetentionOf(config.RetentionRuns)
		}),
		Tickets: state.NewStore[contracts.ResumeTicket](tickets, state.WithJetStream(js)),
		Now:     func() time.Time { return time.Now().UTC() },
		cache:   newBatchCache(batchCacheSize),
	}
	// Every call-record write goes through the announcing store: a terminal revision is
	// the call's output (records.go).
	e.Calls = state.NewPartitionedStore[contracts.CallRecord](calls, CallKeyRoute(names), state.WithJetStream(js)).WithAnnounce(e.announceCall)
	// And every run-record write: the revision that records a batch is the gate's work.
	e.Runs = state.NewPartitionedStore[contracts.RunRecord](runs, RunKeyRoute(names), state.WithJetStream(js)).WithAnnounce(e.announceRun).WithTTL(RunRecordTTL(cfg))
	return e, nil
}

// OpenPartitioned returns the store of T over the bucket bucketOf names in every partition
// of names, keys routed by route ([RunKeyRoute], [CallKeyRoute]): for readers without a
// service environment (the CLI, the api's reader).
func OpenPartitioned[T any](ctx context.Context, js jetstream.JetStream, names contracts.Names, bucketOf func(contracts.Names) string, route state.Route) (*state.Store[T], error) {
	var kvs []jetstream.KeyValue
	for _, pn := range names.EachPartition() {
		kv, err := js.KeyValue(ctx, bucketOf(pn))
		if err != nil {
			return nil, fmt.Errorf("pipeline: bucket %s: %w", bucketOf(pn), err)
		}
		kvs = append(kvs, kv)
	}
	return state.NewPartitionedStore[T](kvs, route, state.WithJetStream(js)), nil
}

// RunKeyRoute routes a run key or a batch key ({run}.{step}), or a pattern of them, to the
// partition of the run its first token names; -1 for a pattern whose run is a wildcard.
func RunKeyRoute(names contracts.Names) state.Route {
	return func(key string) int {
		run, _, _ := strings.Cut(key, ".")
		if wildcard(run) {
			return -1
		}
		return names.PartitionOf(run)
	}
}

// CallKeyRoute routes a call key ({target}.{run}.{step}.{call}, contracts.CallKey), or a
// pattern of them, to the partition of the run its second token names; -1 for a pattern
// whose run is a wildcard or missing.
func CallKeyRoute(names contracts.Names) state.Route {
	return func(key string) int {
		_, rest, ok := strings.Cut(key, ".")
		run, _, _ := strings.Cut(rest, ".")
		if !ok || wildcard(run) {
			return -1
		}
		return names.PartitionOf(run)
	}
}

func wildcard(token string) bool { return token == "" || token == "*" || token == ">" }

// RunRecordTTL is the lifetime every write gives a run record: none while the run has a
// batch open (a live run never expires), else twice the run retention. The run record is
// the run's exactly-once marker — it names the last step the run accepted, so a batch
// whose records are gone is refused rather than run again (docs/protocol.md, "Exactly
// once across retention") — and so it outlives the records of the run's batches, which
// expire after one retention, by one retention more.
func RunRecordTTL(cfg *config.Config) func(*contracts.RunRecord) time.Duration {
	return func(r *contracts.RunRecord) time.Duration {
		if r.ActiveStep != nil || (r.Batch != nil && r.Batch.Phase == contracts.BatchPhaseOpen) {
			return 0
		}
		return 2 * cfg.RetentionOf(config.RetentionRuns)
	}
}

// SetTelemetry attaches t to the environment: services record their metrics on it and
// observe their consume loops with it, and every event published through e.Pub carries
// the trace context of the publishing handler's span (the CloudEvents distributed-tracing
// extension). Call it once, before the service starts; nil detaches.
func (e *Env) SetTelemetry(t *telemetry.Telemetry) {
	e.Telemetry = t
	if t == nil {
		e.Pub = e.Pub.WithInjector(nil)
		return
	}
	e.Pub = e.Pub.WithInjector(t.Inject)
}

// ErrBatchNotFound means a work message names a batch that has no record.
var ErrBatchNotFound = errors.New("batch record not found")

// Batch returns the batch record of (runID, step). The submission and pins never change
// after creation, so a cached copy is returned when there is one; its Phase may be stale —
// read the store when the phase matters.
func (e *Env) Batch(ctx context.Context, runID string, step int64) (*contracts.BatchRecord, error) {
	key := contracts.BatchKey(runID, step)
	if rec, ok := e.cache.get(key); ok {
		return rec, nil
	}
	rec, err := e.FreshBatch(ctx, runID, step)
	if err != nil {
		return nil, err
	}
	e.cache.put(key, &rec)
	return &rec, nil
}

// FreshBatch reads the record of (runID, step) from the store ([ReadBatch]: the run
// record's current batch or the archive), never from the cache. A record the read finds
// missing is read again from the leaders of the streams before ErrBatchNotFound is
// returned: the batcher records a batch before any work of it exists, so a handler
// holding such work that finds no record has, in a cluster, asked a replica behind that
// write — and an absence taken for the truth drops the work for good.
func (e *Env) FreshBatch(ctx context.Context, runID string, step int64) (contracts.BatchRecord, error) {
	rec, err := ReadBatch(ctx, e.Runs, e.Batches, runID, step, false)
	if errors.Is(err, state.ErrNotFound) {
		rec, err = ReadBatch(ctx, e.Runs, e.Batches, runID, step, true)
	}
	if errors.Is(err, state.ErrNotFound) {
		return rec, fmt.Errorf("%w: %s", ErrBatchNotFound, contracts.BatchID(runID, step))
	}
	return rec, err
}

// CachedBatch returns the cached record of (runID, step), if there is one, without reading
// the store.
func (e *Env) CachedBatch(runID string, step int64) (*contracts.BatchRecord, bool) {
	return e.cache.get(contracts.BatchKey(runID, step))
}

// Remember puts rec, just written by this service, in the batch cache, so that the
// service's own next look-up of the batch costs no read.
func (e *Env) Remember(rec *contracts.BatchRecord) {
	e.cache.put(contracts.BatchKey(rec.Submission.RunID, rec.Submission.Step), rec)
}

// Event builds a CloudEvent from service with a deterministic id.
func (e *Env) Event(service, id, typ string, payload any) (cloudevent.Event, error) {
	return cloudevent.NewEvent(id, "awaken/"+service, typ, payload)
}

// Delivery is how a pipeline service's consumers settle their messages: the service's
// own defaults (ack wait, deliveries, back-off, workers), adjusted by opts, with the dead
// letters named by e.Names, observed by e's telemetry, and every handler run bounded by
// [bus.DefaultHandlerTimeout].
func (e *Env) Delivery(defaults bus.DeliveryOptions, opts ...bus.DeliveryOption) bus.DeliveryOptions {
	defaults.Names, defaults.Observer, defaults.HandlerTimeout = e.Names, e.Telemetry.Observer(), bus.DefaultHandlerTimeout
	return defaults.With(opts...)
}

// OpenCounters opens the counters bucket: the body-run ledger of the executors (when
// executors.body_ledger is on) and the example counter tool's counters. Only those open it;
// no other service touches the bucket (nor needs a permission on it).
func (e *Env) OpenCounters(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := e.JS.KeyValue(ctx, e.Names.CountersBucket())
	if err != nil {
		return nil, fmt.Errorf("pipeline: counters bucket %s: %w", e.Names.CountersBucket(), err)
	}
	return kv, nil
}
