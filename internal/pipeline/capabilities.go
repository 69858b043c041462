package pipeline

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The capabilities below are what the services do with the connection, each named for
// what it does, so that a service's dependencies read off the calls it makes and no
// service holds the raw connection (Env.Conn, Env.JS): an archrule
// (internal/archrules) keeps services/ off those two fields.

// StartConsumers ensures the durable consumers of routes and starts consuming them
// ([bus.Start]), settling each message as opts say.
func (e *Env) StartConsumers(ctx context.Context, opts bus.DeliveryOptions, routes []bus.Route, log zerolog.Logger) (*bus.Consumers, error) {
	return bus.Start(ctx, e.JS, opts, routes, log)
}

// PublishNotice publishes ev on subject as a core NATS message: nothing is stored and
// nothing is deduplicated, so a notice is for what a lost message only delays (a stop
// request the executor may miss, the batcher's unchanged notice a client also asks for).
func (e *Env) PublishNotice(subject string, ev cloudevent.Event) error {
	return e.Conn.PublishMsg(cloudevent.EncodeMsg(subject, ev))
}

// ListenNotices calls handle, on the connection's goroutine, with every core NATS message
// on subject (wildcards allowed) until stop is called. Best effort: a message the
// subscription misses is not delivered again.
func (e *Env) ListenNotices(subject string, handle func(*nats.Msg)) (stop func() error, err error) {
	sub, err := e.Conn.Subscribe(subject, handle)
	if err != nil {
		return nil, err
	}
	return sub.Unsubscribe, nil
}

// PublishReply publishes msg (its Subject the reply subject of a request) on the
// connection: the answer of a request handled away from its subscription.
func (e *Env) PublishReply(msg *nats.Msg) error {
	return e.Conn.PublishMsg(msg)
}

// AddMicroService registers a NATS micro service on the connection; FlushSubscriptions
// then makes sure the server has read its endpoints.
func (e *Env) AddMicroService(cfg micro.Config) (micro.Service, error) {
	return micro.AddService(e.Conn, cfg)
}

// FlushSubscriptions returns once the server has read every subscription made on the
// connection so far.
func (e *Env) FlushSubscriptions() error {
	return e.Conn.Flush()
}

// Connected reports whether the connection to the server is up.
func (e *Env) Connected() bool {
	return e.Conn != nil && e.Conn.IsConnected()
}

// MaxPayload is the largest message the connected server accepts, 0 when the connection
// cannot say.
func (e *Env) MaxPayload() int64 {
	if e.Conn == nil {
		return 0
	}
	return e.Conn.MaxPayload()
}

// Stream binds the stream called name: its info, its messages by subject, its purges.
func (e *Env) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	return e.JS.Stream(ctx, name)
}

// ReadLastFromLeader reads the last message on subject of stream as the stream's leader
// holds it ([state.ReadLastFromLeader]): not a replica's older view.
func (e *Env) ReadLastFromLeader(ctx context.Context, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return state.ReadLastFromLeader(ctx, e.JS.Conn(), stream, subject)
}

// StreamReader reads streams from a point on, in order, through ordered consumers that
// leave no durable state on the server, and deletes such a consumer once read.
type StreamReader interface {
	OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error)
	DeleteConsumer(ctx context.Context, stream string, consumer string) error
}

// StreamReader returns the environment's [StreamReader].
func (e *Env) StreamReader() StreamReader { return e.JS }

// LimitsBucket binds the limits ledger's bucket (jetstream.ErrBucketNotFound: a
// deployment set up before limits existed).
func (e *Env) LimitsBucket(ctx context.Context) (jetstream.KeyValue, error) {
	return e.JS.KeyValue(ctx, e.Names.LimitsBucket())
}

// LimitsLedger binds the limits ledger's bucket as a store of ledger entries, whose
// reads from the leader go to the stream (jetstream.ErrBucketNotFound: a deployment set
// up before limits existed).
func (e *Env) LimitsLedger(ctx context.Context) (*state.Store[contracts.LimitLedgerEntry], error) {
	kv, err := e.LimitsBucket(ctx)
	if err != nil {
		return nil, err
	}
	return state.NewStore[contracts.LimitLedgerEntry](kv, state.WithJetStream(e.JS)), nil
}

// ToolsBucket binds the bucket where the executors publish their tool descriptors
// (jetstream.ErrBucketNotFound: none is set up).
func (e *Env) ToolsBucket(ctx context.Context) (jetstream.KeyValue, error) {
	return e.JS.KeyValue(ctx, e.Names.ToolsBucket())
}

// ToolPausesBucket binds the bucket of the operators' tool pauses, for writing them
// ([Env.ToolPaused] reads them).
func (e *Env) ToolPausesBucket(ctx context.Context) (jetstream.KeyValue, error) {
	return e.JS.KeyValue(ctx, e.Names.ToolPausesBucket())
}

// WatchBucket watches the changes of bucket made from now on.
func (e *Env) WatchBucket(ctx context.Context, bucket string) (jetstream.KeyWatcher, error) {
	kv, err := e.JS.KeyValue(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return kv.WatchAll(ctx, jetstream.UpdatesOnly())
}

// AuditChains is the chain of every partition's audit stream — one appender per partition,
// in the order of [contracts.Names.EachPartition] — that Pub appends audit records
// through, for the records not published through Pub (the checkpoints).
func (e *Env) AuditChains() auditlog.Partitioned {
	return e.audit
}
