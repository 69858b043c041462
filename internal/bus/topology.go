package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// DefaultDuplicates is the deduplication window of every stream: a re-publish with the same
// Nats-Msg-Id inside it is acknowledged as a duplicate and not stored again. Beyond it the
// KV state alone makes a re-publish harmless: handlers re-publish only what the state says.
const DefaultDuplicates = 2 * time.Minute

// TopologyConfig sizes the streams and buckets. The zero value is usable: file storage,
// one replica, the default duplicate window and the default ages below. A zero age
// selects the stream's default, a negative one ([NoAgeLimit]) keeps messages without an
// age limit; the timers and audit streams default to no age limit at all.
type TopologyConfig struct {
	// Replicas of every stream and bucket: 1 for a single server, 3 in a cluster.
	Replicas int
	// Storage of every stream and bucket; the zero value is file storage.
	Storage jetstream.StorageType
	// Duplicates is the deduplication window; 0 means [DefaultDuplicates].
	Duplicates time.Duration

	// Per-stream retention. Results are the product and are kept longest. (No stream holds
	// work of its own: every hand-off is a revision of the record it changes.)
	SubmissionsMaxAge time.Duration
	ResultsMaxAge     time.Duration
	// TicketsMaxAge bounds the tickets stream (the gate's opened, resolved, rejected).
	// A live ticket is held by the tickets bucket and its timer by the timers stream, so
	// ageing out this log loses no ticket. (Resume commands are in the control stream,
	// consumed by the gate within seconds: ControlMaxAge only has to outlast a gate outage.)
	TicketsMaxAge time.Duration
	// TimersMaxAge must outlive the furthest due_at or deadline ever scheduled, because the
	// schedule messages live in the timers stream: the default keeps them without age limit.
	TimersMaxAge     time.Duration
	ControlMaxAge    time.Duration
	EventsMaxAge     time.Duration
	AuditMaxAge      time.Duration
	DeadLetterMaxAge time.Duration
	// RunsMaxAge is how long a finished run's records stay in the buckets (their writers
	// give them a per-message TTL of it, see pipeline.NewEnv); it sizes how long the batch
	// archive and the runs bucket keep the marker of an expired record, which drives the
	// sweep of the batch's call and ticket records and of the run's limits ledger keys.
	RunsMaxAge time.Duration
	// Partitions is the deployment's partition count (0 or 1: one). The partitioned
	// stores — the calls, runs and batches buckets and the results and audit streams —
	// exist once per partition (contracts.Names.Partition); the count is recorded in the
	// submissions stream's metadata ([contracts.PartitionsMetadataKey]) when above 1.
	Partitions int
}

// NoAgeLimit is the TopologyConfig age that keeps messages without an age limit.
const NoAgeLimit time.Duration = -1

// Default retention ages, applied when a TopologyConfig age is zero.
const (
	DefaultSubmissionsMaxAge = 7 * 24 * time.Hour
	DefaultResultsMaxAge     = 7 * 24 * time.Hour
	DefaultControlMaxAge     = 7 * 24 * time.Hour
	DefaultTicketsMaxAge     = 7 * 24 * time.Hour
	DefaultEventsMaxAge      = 7 * 24 * time.Hour
	DefaultDeadLetterMaxAge  = 30 * 24 * time.Hour
	DefaultRunsMaxAge        = 7 * 24 * time.Hour
)

func age(v, def time.Duration) time.Duration {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

// runsAge is cfg's RunsMaxAge with its default applied; 0 means the records never expire.
func (cfg TopologyConfig) runsAge() time.Duration { return age(cfg.RunsMaxAge, DefaultRunsMaxAge) }

// expiryMarkerTTL is how long the runs bucket keeps the delete marker the server leaves
// where a run record expired. The marker is what drives the sweep of an expired run's
// run-keyed ledger keys (gate-run-sweeper), and a sweeper that is down sees, when it comes
// back, only the markers still kept: one down for less than this misses none. Half the
// retention, so that no trace of a run outlives two and a half retentions.
func (cfg TopologyConfig) expiryMarkerTTL() time.Duration {
	return max(cfg.retention()/2, time.Second)
}

// archiveMarkerTTL is how long the batch archive keeps the marker of an expired archived
// batch: it drives the sweep of the batch's call and ticket records and step-keyed ledger
// keys (gate-sweeper), and it also tells the claim of the run's next batch that the batch
// it finds finalized in the run record was published and has expired, so the claim does
// not archive it again (pipeline.ArchiveBatch). The run record outlives the archive by one
// retention at most (it expires 2R after the finalize, the archive R after the publication
// that follows it), so the marker is kept one retention.
func (cfg TopologyConfig) archiveMarkerTTL() time.Duration {
	return max(cfg.retention(), time.Second)
}

// retention is the run retention the markers are sized by (its default when the records
// never expire).
func (cfg TopologyConfig) retention() time.Duration {
	if r := cfg.runsAge(); r > 0 {
		return r
	}
	return DefaultRunsMaxAge
}

// ageOrUnlimited is for the streams whose default is "no age limit".
func ageOrUnlimited(v time.Duration) time.Duration {
	if v < 0 {
		return 0
	}
	return v
}

// StreamConfigs returns the configuration of every awaken stream, as EnsureTopology
// applies it. It is exported so operators and tests can inspect the exact topology.
func StreamConfigs(names contracts.Names, cfg TopologyConfig) []jetstream.StreamConfig {
	p := names.Prefix
	dup := cfg.Duplicates
	if dup <= 0 {
		dup = DefaultDuplicates
	}
	replicas := cfg.Replicas
	if replicas <= 0 {
		replicas = 1
	}
	stream := func(name, desc, subject string, maxAge time.Duration) jetstream.StreamConfig {
		d := dup
		if maxAge > 0 && d > maxAge {
			d = maxAge // the server requires Duplicates <= MaxAge
		}
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    []string{subject},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      maxAge,
			Storage:     cfg.Storage,
			Replicas:    replicas,
			Duplicates:  d,
		}
	}
	names.Partitions = max(names.Partitions, cfg.Partitions)
	// One results stream per partition. Every partition's republishes to the same
	// committed-results subjects, so a waiting client does not depend on the partition.
	resultsOf := func(pn contracts.Names) jetstream.StreamConfig {
		results := stream(pn.ResultsStream(), "ordered batch results: one message per tool batch (an atomic batch when it exceeds one message)",
			pn.ResultsWildcard(), age(cfg.ResultsMaxAge, DefaultResultsMaxAge))
		results.AllowAtomicPublish = true
		// Operators' corrections of published results live beside them (same retention); the
		// republish below covers the results only.
		results.Subjects = append(results.Subjects, pn.ResultCorrectionsWildcard())
		// The server republishes what it stored, so a waiting client needs no consumer.
		results.RePublish = &jetstream.RePublish{Source: pn.ResultsWildcard(), Destination: names.CommittedResultsWildcard()}
		return results
	}
	results := resultsOf(names.Partition(0))
	// The gate's side of the ticket protocol (opened, resolved, rejected) and the ticket
	// timers live in two streams because message schedules are a stream-wide switch and a
	// schedule is not bound by the publisher's grants: the server stores what a schedule
	// produces on its target subject, any subject of the stream. Only the gate writes
	// either; the timers stream allows schedules.
	//
	// No client writes a stream that holds a service's records: a stream deduplicates
	// message ids across all its subjects, and the services' ids are deterministic (a
	// redelivery re-publishes under the same id), so a client publishing first under the
	// id of a record about to be written would have the stream drop the record as a
	// duplicate. The clients' resume commands are therefore stored in the control stream
	// with the other client commands.
	tickets := stream(names.TicketsStream(), "approval tickets: opened, resolved, rejected (gate only)",
		names.TicketOpenedSubject(), age(cfg.TicketsMaxAge, DefaultTicketsMaxAge))
	tickets.Subjects = append(tickets.Subjects, names.TicketResolvedSubject(), names.TicketRejectedSubject())
	tickets.AllowMsgSchedules = false
	// The server cannot switch per-message TTLs off once on (older topologies had them on
	// here).
	tickets.AllowMsgTTL = true
	// The clients' commands: cancellations and resolutions (under {prefix}.runs.>) and
	// resume commands on two subjects: the public one, whose actor is the publisher's
	// claim, and the api's, which only the api user may publish (its actors are
	// authenticated by a door). Only clients write here; the gate's durables read it.
	control := stream(names.ControlStream(), "client commands: run and call cancellations, call resolutions, ticket resume commands",
		p+".runs.>", age(cfg.ControlMaxAge, DefaultControlMaxAge))
	control.Subjects = append(control.Subjects, names.TicketResumeSubject(), names.TicketResumeAPISubject())
	// What clients record of their own doings (awaken mcp-serve's calls), kept as long as
	// the audit trail but outside it.
	claims := stream(names.ClaimsStream(), "records clients write of their own doings (awaken mcp-serve's MCP calls): claims, never signed",
		p+".claims.>", ageOrUnlimited(cfg.AuditMaxAge))
	timers := stream(names.TimersStream(), "ticket due times and approval deadlines (message schedules; gate only)",
		names.TicketExpireSubject(), ageOrUnlimited(cfg.TimersMaxAge))
	timers.Subjects = append(timers.Subjects, names.TicketScheduleSubject(">")) // correlation ids hold dots
	timers.AllowMsgSchedules = true
	timers.AllowMsgTTL = true
	auditOf := func(pn contracts.Names) jetstream.StreamConfig {
		return stream(pn.AuditStream(), "the signed audit trail: permission decisions, tool pauses, reconciles, the api's MCP calls (services only)",
			pn.AuditWildcard(), ageOrUnlimited(cfg.AuditMaxAge))
	}
	submissions := stream(names.SubmissionsStream(), "tool batch submissions and their rejections",
		p+".batches.>", age(cfg.SubmissionsMaxAge, DefaultSubmissionsMaxAge))
	if names.PartitionCount() > 1 {
		submissions.Metadata = map[string]string{contracts.PartitionsMetadataKey: strconv.Itoa(names.PartitionCount())}
	}
	configs := []jetstream.StreamConfig{
		submissions,
		results,
		// Before timers and control: an older tickets stream held the timer subjects and the
		// resume subjects, and must give them up first.
		tickets,
		timers,
		control,
		stream(names.EventsStream(), "agent-event projection for protocol consumers",
			p+".events.>", age(cfg.EventsMaxAge, DefaultEventsMaxAge)),
		auditOf(names.Partition(0)),
		claims,
		stream(names.DeadLetterStream(), "poisoned and exhausted inputs with the reason in their headers",
			p+".deadletter.>", age(cfg.DeadLetterMaxAge, DefaultDeadLetterMaxAge)),
	}
	// Partitions 1 … P-1 after every shared stream: a deployment with one partition keeps
	// exactly the list above.
	for _, pn := range names.EachPartition()[1:] {
		configs = append(configs, resultsOf(pn), auditOf(pn))
	}
	return configs
}

// BucketConfigs returns the configuration of every awaken key-value bucket. Updates are
// compare-and-swap on the latest revision, which needs no history; the small histories
// kept on calls and tickets are for diagnosis only.
func BucketConfigs(names contracts.Names, cfg TopologyConfig) []jetstream.KeyValueConfig {
	replicas := cfg.Replicas
	if replicas <= 0 {
		replicas = 1
	}
	bucket := func(name, desc string, history uint8) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{
			Bucket:      name,
			Description: desc,
			History:     history,
			Storage:     cfg.Storage,
			Replicas:    replicas,
		}
	}
	// The records of finished runs expire by a per-message TTL on their last write
	// (docs/operations.md, "Data lifecycle"). A TTL removes only the revision that carries
	// it, so these buckets keep one revision per key: with more, the key would come back
	// as its previous revision when the last one expired.
	expiring := func(name, desc string, markerTTL time.Duration) jetstream.KeyValueConfig {
		kc := bucket(name, desc, 1)
		kc.LimitMarkerTTL = markerTTL
		return kc
	}
	names.Partitions = max(names.Partitions, cfg.Partitions)
	batches := func(pn contracts.Names) jetstream.KeyValueConfig {
		return expiring(pn.BatchesBucket(), "one record per finished batch, expiring with the run retention", cfg.archiveMarkerTTL())
	}
	calls := func(pn contracts.Names) jetstream.KeyValueConfig {
		return bucket(pn.CallsBucket(), "one record per operation id (batch_id:call_id)", 5)
	}
	runs := func(pn contracts.Names) jetstream.KeyValueConfig {
		return expiring(pn.RunsBucket(), "one record per run: its active batch and how it ended", cfg.expiryMarkerTTL())
	}
	// Partitions 1 … P-1 first: services wait for partition 0's runs bucket, created after
	// them (servicerun.WaitTopology), so every partition exists then.
	var parts []jetstream.KeyValueConfig
	for _, pn := range names.EachPartition()[1:] {
		parts = append(parts, batches(pn), calls(pn), runs(pn))
	}
	return append(parts,
		// First: services wait for batches, calls, tickets and runs (servicerun.WaitTopology), so
		// it — and the counters bucket before runs — exist then.
		bucket(names.ToolsBucket(), "tool descriptors each executor serves, by target", 1),
		batches(names.Partition(0)),
		calls(names.Partition(0)),
		bucket(names.TicketsBucket(), "one record per parked call, keyed by correlation id", 5),
		bucket(names.CountersBucket(), "compare-and-swap counters", 1),
		runs(names.Partition(0)),
		// Last: older deployments gain it on their next `awaken setup`; until then no tool
		// can be paused, and the gate reads "no bucket" as "nothing paused".
		bucket(names.ToolPausesBucket(), "one record per paused tool (the kill switch), keyed by base64url tool id", 1),
		// After the pauses, for the same reason: until `awaken setup` declares it, a gate
		// whose host policy has limits fails every decision a limit applies to (closed).
		bucket(names.LimitsBucket(), "the host limits' ledger: one key per limit, key value and window", 1),
	)
}

// ObjectStoreConfig returns the configuration of the objects bucket, where the executors
// store outputs too large to carry inline. Its objects expire with the results stream's
// max age: a result links to its object for as long as the stream keeps the result, and
// no longer (the object store's TTL is the results stream's MaxAge, so both age out
// together; a link read after that answers not found).
func ObjectStoreConfig(names contracts.Names, cfg TopologyConfig) jetstream.ObjectStoreConfig {
	replicas := cfg.Replicas
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.ObjectStoreConfig{
		Bucket:      names.ObjectsBucket(),
		Description: "tool outputs too large to carry inline, named by operation id and digest",
		TTL:         age(cfg.ResultsMaxAge, DefaultResultsMaxAge),
		Storage:     cfg.Storage,
		Replicas:    replicas,
	}
}

// EnsureTopology creates every stream and bucket of names, or updates them to cfg, as
// [ApplyTopology] does, without logging the changes.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, names contracts.Names, cfg TopologyConfig) error {
	_, err := ApplyTopology(ctx, js, names, cfg, zerolog.Nop())
	return err
}

// ErrSchedulesStillAllowed is returned by [EnsureTopology] when a stream that clients write
// was created by an older version with message schedules allowed. The server cannot switch
// schedules off in place, and while they are on, a client can make the server store
// messages on subjects its grants forbid. The operator moves the stream aside once, with
// no ticket pending: delete it (the ticket records live in the tickets bucket) and run
// setup again.
var ErrSchedulesStillAllowed = errors.New("bus: stream still allows message schedules")

func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) error {
	if !sc.AllowMsgSchedules {
		if st, err := js.Stream(ctx, sc.Name); err == nil && st.CachedInfo().Config.AllowMsgSchedules {
			return fmt.Errorf("%w: %s (created by an older awaken; the server cannot turn schedules off: "+
				"delete the stream while no ticket is pending, e.g. `nats stream rm %s`, and run setup again)",
				ErrSchedulesStillAllowed, sc.Name, sc.Name)
		}
	}
	_, err := js.CreateOrUpdateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Lost a creation race against another service: the stream exists now, so an
		// update applies our configuration.
		_, err = js.UpdateStream(ctx, sc)
	}
	return err
}

// Consumer defaults, applied by EnsureConsumer and Consume to zero fields of a ConsumerSpec.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultMaxDeliver = 5
	DefaultWorkers    = 1
)

// DefaultBackOff is the one nak-delay schedule of awaken's consumers: the delay after the
// n-th failed delivery is the n-th entry, the last repeating. It starts at 100 ms so a
// crash, or a record read behind its write, is repaired quickly, and grows so a broken
// dependency is not hammered.
func DefaultBackOff() []time.Duration {
	return []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}
}

// ConsumerConfig returns the durable pull-consumer configuration for spec, as
// EnsureConsumer applies it.
//
// MaxDeliver is enforced by the consume loop, not by the server: the server config
// is unlimited (-1). A server limit would leave a message that is still unsettled after
// its last delivery — a crash, a failed dead-letter publish, a [Retry] — stuck as
// pending forever, and the batch it belongs to would never finish. For the same reason
// spec.BackOff is applied as the nak delay by the consume loop and not configured as the
// server BackOff, which would also replace AckWait and break the heartbeat timing.
func ConsumerConfig(spec ConsumerSpec) jetstream.ConsumerConfig {
	spec = spec.withDefaults()
	cc := jetstream.ConsumerConfig{
		Durable:       spec.Durable,
		Description:   "awaken consumer " + spec.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: spec.MaxAckPending,
	}
	switch len(spec.FilterSubjects) {
	case 0:
	case 1:
		cc.FilterSubject = spec.FilterSubjects[0]
	default:
		cc.FilterSubjects = append([]string(nil), spec.FilterSubjects...)
	}
	return cc
}

// EnsureConsumer creates the durable pull consumer of spec on stream (spec.Stream when
// stream is empty), or updates it to spec. It is idempotent; the durable's delivery state
// survives updates.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, spec ConsumerSpec) (jetstream.Consumer, error) {
	if stream == "" {
		stream = spec.Stream
	}
	if stream == "" || spec.Durable == "" {
		return nil, fmt.Errorf("bus: ensure consumer: stream %q and durable %q must both be set", stream, spec.Durable)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, ConsumerConfig(spec))
	if err != nil {
		return nil, fmt.Errorf("bus: ensure consumer %s on %s: %w", spec.Durable, stream, err)
	}
	return cons, nil
}
