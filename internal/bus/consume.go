package bus

import (
	"context"
	"errors"
	"fmt"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Headers of a dead-letter copy. The original headers and body are kept unchanged, except
// the JetStream control headers (Nats-*), which would make the dead-letter stream act on
// them (atomic batch, schedule, TTL, expectations); the original message id is kept in
// Awaken-Original-Msg-Id.
const (
	HeaderDeadReason       = "Awaken-Dead-Reason"
	HeaderDeadCode         = "Awaken-Dead-Code"
	HeaderOriginalSubject  = "Awaken-Original-Subject"
	HeaderOriginalStream   = "Awaken-Original-Stream"
	HeaderOriginalSequence = "Awaken-Original-Sequence"
	HeaderOriginalMsgID    = "Awaken-Original-Msg-Id"
	HeaderConsumer         = "Awaken-Consumer"
	HeaderDelivered        = "Awaken-Delivered"
)

// maxReasonLen bounds the reason written to a header and to the termination advisory.
const maxReasonLen = 1024

// DefaultSettleTimeout bounds each settlement round trip (DoubleAck, dead-letter publish).
const DefaultSettleTimeout = 5 * time.Second

// DefaultPullExpiry is the lifetime of one pull request (the nats.go default).
const DefaultPullExpiry = 30 * time.Second

// FaultPoint names a place in the consume loop where a test can inject a fault.
type FaultPoint string

// FaultAfterHandlerBeforeAck is reached after a handler returned nil — its state change
// and outputs are durable — and before the message is acknowledged. A fault here must
// behave like a crash: the input is redelivered and its handler finds the work done.
const FaultAfterHandlerBeforeAck FaultPoint = "after-handler-before-ack"

// Delivery is one received message as a handler sees it. Event is the zero value when the
// envelope itself could not be decoded (only OnReject sees such a delivery).
type Delivery struct {
	Event cloudevent.Event
	// Msg is the raw JetStream message. Handlers must not settle it: the consume loop does.
	Msg          jetstream.Msg
	Subject      string
	NumDelivered uint64
	// MaxDeliver is the spec's limit; a delivery with NumDelivered >= MaxDeliver is the
	// last one before a transient failure exhausts the message. Zero or less: unlimited.
	MaxDeliver int
	Consumer   string
	Stream     string
	StreamSeq  uint64
}

// EnvelopeDecoded reports whether d's CloudEvents envelope decoded. A delivery that reaches
// a handler always has; one that OnReject sees may not, and then its Event is the zero
// value and only Msg holds what arrived.
func (d Delivery) EnvelopeDecoded() bool { return d.Event.Type != "" || d.Event.ID != "" }

// Handler processes one delivery. It returns nil only once its state change and every
// output it publishes are durable; the message is acknowledged after that. Returning an
// error wrapping a [*contracts.Rejection] or [Permanent] dead-letters the message,
// [Retry] redelivers it after a delay, any other error is transient and retried with
// back-off. Handlers run concurrently (ConsumerSpec.Workers) and must be idempotent:
// every message may be delivered more than once.
type Handler func(ctx context.Context, d Delivery) error

// ConsumerSpec describes one durable pull consumer and how its messages are settled.
type ConsumerSpec struct {
	// Stream and Durable name the consumer; use the names from pkg/contracts.
	Stream, Durable string
	// FilterSubjects restricts the consumer to these subjects of the stream.
	FilterSubjects []string
	// AckWait is how long the server waits for a settlement before redelivering;
	// heartbeats (InProgress) keep a running handler's message alive every AckWait/3.
	// Default [DefaultAckWait].
	AckWait time.Duration
	// MaxDeliver is the number of deliveries after which a transient failure exhausts the
	// message (OnExhausted, dead letter, terminate). 0 means [DefaultMaxDeliver], a
	// negative value means unlimited. Enforced by the consume loop; see [ConsumerConfig].
	MaxDeliver int
	// BackOff is the nak delay after the n-th failed delivery (BackOff[n-1], the last entry
	// repeating). Default: [DefaultBackOff].
	BackOff []time.Duration
	// MaxAckPending caps unacknowledged messages across every instance of the service;
	// 0 keeps the server default (1000).
	MaxAckPending int
	// Workers is the number of handlers running at once in this process; default 1.
	Workers int
	// Limit, when set, is shared with other consumers of this process: at most its size of
	// their handlers run at once, whatever their Workers (the partitions of one route
	// share one: [PerPartition]). A message fetched while the limit is full waits for it
	// heartbeated.
	Limit *HandlerLimit
	// AcceptTypes lists the CloudEvent types this consumer handles; any other type is
	// rejected with wrong_type (on a Records consumer: ignored). Empty accepts every type.
	AcceptTypes []string
	// Records marks a consumer of a key-value bucket's stream (Stream
	// contracts.RecordStream(bucket), FilterSubjects contracts.RecordSubject(bucket,
	// pattern)), whose work items are the record revisions written with ce-* headers
	// (state.Store.WithAnnounce). Every other revision — a delete or purge marker, a
	// revision written as a plain key-value update because it hands nothing on, one of a
	// type not in AcceptTypes — is acknowledged and ignored quietly, never dead-lettered.
	// A ce-typed revision of an accepted type that does not decode is dead-lettered as on
	// any stream. The Event's Data is the record JSON.
	Records bool
	// Expiries, on a Records consumer, also hands the handler every marker the server
	// leaves where a revision expired (its per-message TTL, or the bucket's age): an Event
	// of type [TypeRecordExpired] with no data, on the expired key's subject. AcceptTypes
	// does not apply to them.
	Expiries bool
	// Names gives the dead-letter subject (Names.DeadLetterSubject(Durable)); a zero
	// Names uses the default prefix.
	Names contracts.Names
	// OnReject runs before a rejected or permanently failing message is dead-lettered,
	// typically to publish a rejection event. It must be idempotent (a failed settlement
	// repeats it). If it fails the message is redelivered with back-off, and on the last
	// delivery it is dead-lettered anyway.
	OnReject func(ctx context.Context, d Delivery, rej *contracts.Rejection) error
	// OnExhausted runs when a transient failure happens on the last allowed delivery,
	// before the message is dead-lettered with code exhausted; services mark the call
	// Indeterminate here so its batch still finishes. It must be idempotent; if it fails
	// the message is redelivered and the hook runs again on the next failure.
	OnExhausted func(ctx context.Context, d Delivery, cause error) error
	// Fault, when set (tests only), is called at each [FaultPoint]; a non-nil error
	// abandons the message unsettled, as a crash would.
	Fault func(ctx context.Context, p FaultPoint, d Delivery) error
	// SettleTimeout bounds each acknowledgement and dead-letter publish; default
	// [DefaultSettleTimeout].
	SettleTimeout time.Duration
	// PullExpiry is the lifetime of each pull request (at least 1s; default 30s). The
	// server heartbeats a waiting request every PullExpiry/2, so it also bounds how long
	// a lost consumer or connection goes unnoticed.
	PullExpiry time.Duration
	// Observer, when set, sees every delivery and its settlement: metrics and tracing
	// plug in here without the bus depending on them. Nil turns observation off.
	Observer Observer
	// HandlerTimeout, when positive, is the deadline of each handler run: its context is
	// cancelled then, and the error redelivers the message. The heartbeat keeps a running
	// handler's message from being redelivered, so without a deadline one JetStream call
	// that never returns (a reply lost in a leader change) would hold its message, and
	// the batch behind it, forever. Services whose handlers only talk to JetStream set
	// [DefaultHandlerTimeout]; executors, whose handlers run tools, bound those instead.
	HandlerTimeout time.Duration
}

// DefaultHandlerTimeout bounds the handlers of the batcher, the gate and the publisher:
// far above what any of their handlers needs, far below forever.
const DefaultHandlerTimeout = time.Minute

// Settlement is how the consume loop disposed of one delivery.
type Settlement string

// The settlements an [Observer] is told about.
const (
	// SettledAck: the handler succeeded and the acknowledgement was confirmed.
	SettledAck Settlement = "ack"
	// SettledNak: the message was returned for redelivery (transient failure, retry
	// request, shutdown, or a failed hook or dead-letter publish).
	SettledNak Settlement = "nak"
	// SettledDeadLetter: the message was copied to the dead-letter subject and terminated.
	SettledDeadLetter Settlement = "dead_letter"
	// SettledAbandoned: the message was left unsettled (an injected fault, or an
	// acknowledgement or termination the server did not confirm); the server redelivers it
	// after the ack wait.
	SettledAbandoned Settlement = "abandoned"
)

// Observation is what an [Observer] learns once a delivery is settled.
type Observation struct {
	Settlement Settlement
	// Code is the dead-letter code (rejection code, permanent or exhausted) when
	// Settlement is SettledDeadLetter, empty otherwise.
	Code contracts.RejectCode
	// Err is the handler's error (nil on success, or when the envelope did not decode).
	Err error
	// Handled reports whether the handler ran (false when the envelope was rejected).
	Handled bool
	// HandlerDuration is how long the handler ran, zero when it did not run.
	HandlerDuration time.Duration
}

// Observer watches a consume loop. Begin is called once per delivery, after the envelope
// is decoded (d.Event is the zero value when it could not be) and before the handler
// runs; it returns the context the handler runs under — e.g. carrying a span that
// continues the trace named by the message's traceparent extension — and a finish
// function the loop calls exactly once with the settlement. Implementations are called
// from every worker concurrently and must be safe for that; they must not block.
//
// Bound is called once when Consume has ensured the durable consumer and its loop runs;
// done is closed when the loop stops for good (Subscription.Done), so an observer can
// report readiness ("consumers bound") without polling the server.
type Observer interface {
	Begin(ctx context.Context, d Delivery) (context.Context, func(Observation))
	Bound(durable string, done <-chan struct{})
}

func (s ConsumerSpec) withDefaults() ConsumerSpec {
	if s.AckWait <= 0 {
		s.AckWait = DefaultAckWait
	}
	if s.MaxDeliver == 0 {
		s.MaxDeliver = DefaultMaxDeliver
	}
	if len(s.BackOff) == 0 {
		s.BackOff = DefaultBackOff()
	}
	if s.Workers <= 0 {
		s.Workers = DefaultWorkers
	}
	if s.Names.Prefix == "" {
		s.Names = contracts.NewNames("")
	}
	if s.SettleTimeout <= 0 {
		s.SettleTimeout = DefaultSettleTimeout
	}
	if s.PullExpiry <= 0 {
		s.PullExpiry = DefaultPullExpiry
	}
	s.PullExpiry = max(s.PullExpiry, time.Second)
	return s
}

// backoff returns the nak delay after the delivered-th delivery failed.
func (s ConsumerSpec) backoff(delivered uint64) time.Duration {
	i := int(min(delivered, uint64(len(s.BackOff)))) - 1
	if i < 0 {
		i = 0
	}
	return s.BackOff[i]
}

// lastDelivery reports whether a transient failure of this delivery exhausts the message.
func (s ConsumerSpec) lastDelivery(delivered uint64) bool {
	return s.MaxDeliver > 0 && delivered >= uint64(s.MaxDeliver)
}

// Subscription is a running consume loop. Stop it with [Subscription.Stop].
type Subscription struct {
	spec   ConsumerSpec
	h      Handler
	js     jetstream.JetStream
	cons   jetstream.Consumer
	ctx    context.Context // the hard-stop context handlers run under
	log    zerolog.Logger
	hbTick time.Duration

	work     chan *inflight
	slots    chan struct{} // one token per busy worker (or message being fetched for one)
	quit     chan struct{} // closed when the loop stops taking messages
	pullDone chan struct{} // closed when the fetch loop has returned
	// pullCtx is cancelled when the loop stops taking messages, so a waiting fetch ends at
	// once instead of at its expiry.
	pullCtx    context.Context
	cancelPull context.CancelFunc
	stopCh     chan struct{} // closed by Stop
	stopOnce   sync.Once
	done       chan struct{} // closed when every worker returned and the fetch loop ended
	workers    sync.WaitGroup
}

// inflight is a message handed from the serial consume callback to a worker; its
// heartbeat runs from arrival, so a message waiting for a worker is covered too.
type inflight struct {
	msg jetstream.Msg
	hb  *heartbeat
}

// Consume ensures the durable pull consumer of spec and processes its messages with h on
// spec.Workers goroutines until ctx ends or Stop is called.
//
// ctx is the hard-stop context: it is the context handlers receive, so Stop does not
// cancel work in progress; cancelling ctx stops consuming at once and cancels handlers.
// The loop fetches only as many messages as it has free workers and hands each to a
// worker on arrival, so at most Workers messages are held by this process and every one
// of them is heartbeated: a message never waits unheartbeated in a client-side buffer
// while handlers are busy, where its ack wait could expire and a second copy reach another
// worker or instance.
func Consume(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, h Handler, log zerolog.Logger) (*Subscription, error) {
	if h == nil {
		return nil, errors.New("bus: consume: nil handler")
	}
	spec = spec.withDefaults()
	cons, err := EnsureConsumer(ctx, js, "", spec)
	if err != nil {
		return nil, err
	}
	s := &Subscription{
		spec:     spec,
		h:        h,
		js:       js,
		cons:     cons,
		log:      log.With().Str("consumer", spec.Durable).Logger(),
		hbTick:   max(spec.AckWait/3, 10*time.Millisecond),
		work:     make(chan *inflight),
		slots:    make(chan struct{}, spec.Workers),
		pullDone: make(chan struct{}),
		quit:     make(chan struct{}),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.ctx = s.log.WithContext(ctx)
	s.pullCtx, s.cancelPull = context.WithCancel(context.Background())
	if spec.MaxAckPending > 0 && spec.MaxAckPending < spec.Workers {
		s.log.Warn().Int("max_ack_pending", spec.MaxAckPending).Int("workers", spec.Workers).
			Msg("max ack pending is below the worker count; some workers will idle")
	}
	s.workers.Add(spec.Workers)
	for range spec.Workers {
		go s.worker()
	}
	go s.pullLoop()
	go s.supervise(ctx)
	if spec.Observer != nil {
		spec.Observer.Bound(spec.Durable, s.done)
	}
	s.log.Info().Str("stream", spec.Stream).Int("workers", spec.Workers).Dur("ack_wait", spec.AckWait).
		Int("max_deliver", spec.MaxDeliver).Msg("consuming")
	return s, nil
}

// Consumer returns the JetStream consumer handle, e.g. to read its info.
func (s *Subscription) Consumer() jetstream.Consumer { return s.cons }

// Done is closed once the loop has fully stopped: no handler runs any more. Besides Stop
// and the hard-stop context, the loop also stops when its pull subscription ends on its
// own (the consumer was deleted, the connection was closed); a service should watch Done
// and exit or restart rather than sit idle.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Stop shuts the loop down gracefully: it stops pulling (draining the pull subscription),
// returns any message not yet handed to a worker to the server, and waits for the
// handlers in flight to finish and settle — bounded by ctx. Handlers are not cancelled.
// Stop is idempotent and safe to call concurrently.
func (s *Subscription) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopCh) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bus: stop consumer %s: handlers still running: %w", s.spec.Durable, ctx.Err())
	}
}

func (s *Subscription) supervise(ctx context.Context) {
	graceful := false
	select {
	case <-s.stopCh:
		graceful = true
	case <-ctx.Done():
	case <-s.pullDone:
		// The fetch loop ended by itself: the consumer was deleted or the connection
		// closed for good. Stop the loop so Done tells the service.
		s.log.Error().Msg("pulling ended unexpectedly; consumer loop stopping")
		graceful = true
	}
	close(s.quit)
	s.cancelPull()
	// Once the fetch loop has returned no message can reach a worker any more; then wait
	// for the handlers in flight.
	<-s.pullDone
	s.log.Info().Bool("graceful", graceful).Msg("pulling stopped; waiting for in-flight handlers")
	s.workers.Wait()
	s.log.Info().Bool("graceful", graceful).Msg("consumer stopped")
	close(s.done)
}

// fetchWait bounds one pull request; an idle consumer costs one pull request per
// fetchWait. Stop does not wait for it: the waiting fetch is cancelled.
const fetchWait = 5 * time.Second

// pullLoop fetches exactly as many messages as there are free workers, hands each to a
// worker as it arrives, and starts its heartbeat on arrival, so no message ever waits
// unheartbeated in a client-side buffer (where its ack wait could expire and a second copy
// reach another instance). Explicit fetches replace nats.go's Consume here because its
// pending-request accounting with a one-message window was seen to stall for a whole pull
// expiry under load; a fetch either returns messages or ends at fetchWait, nothing hidden.
func (s *Subscription) pullLoop() {
	defer close(s.pullDone)
	wait := min(fetchWait, s.spec.PullExpiry)
	for {
		// Wait for one free worker, then take every other free one.
		select {
		case s.slots <- struct{}{}:
		case <-s.quit:
			return
		}
		n := 1
	grab:
		for n < s.spec.Workers {
			select {
			case s.slots <- struct{}{}:
				n++
			default:
				break grab
			}
		}
		fctx, cancel := context.WithTimeout(s.pullCtx, wait)
		batch, err := s.cons.Fetch(n, jetstream.FetchContext(fctx))
		got := 0
		if err == nil {
			for m := range batch.Messages() {
				got++
				s.dispatch(m)
			}
			err = batch.Error()
		}
		cancel()
		s.release(n - got)
		if s.pullCtx.Err() != nil {
			return
		}
		if err == nil || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if s.fatalFetch(err) {
			return
		}
		s.log.Debug().Err(err).Msg("fetch failed; retrying")
		select {
		case <-time.After(250 * time.Millisecond):
		case <-s.quit:
			return
		}
	}
}

// fatalFetch reports whether err means the loop can never pull again. "No responders"
// is what a pull on a deleted consumer gets, but also what a pull gets during a
// reconnect or a leader change, so it is fatal only if the consumer is really gone.
func (s *Subscription) fatalFetch(err error) bool {
	gone := errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, nats.ErrConnectionClosed)
	if !gone && errors.Is(err, nats.ErrNoResponders) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.spec.SettleTimeout)
		_, ierr := s.cons.Info(ctx)
		cancel()
		gone = errors.Is(ierr, jetstream.ErrConsumerNotFound)
	}
	if gone {
		s.log.Error().Err(err).Msg("consumer can no longer be pulled")
	}
	return gone
}

// release gives back n worker slots that no message used.
func (s *Subscription) release(n int) {
	for range n {
		<-s.slots
	}
}

// dispatch starts a message's heartbeat and hands it to a worker; a worker is free, since
// its slot was taken before the fetch. When stopping, the message is given back at once
// so another instance takes it.
func (s *Subscription) dispatch(m jetstream.Msg) {
	select {
	case <-s.quit:
		_ = m.Nak()
		<-s.slots
		return
	default:
	}
	f := &inflight{msg: m, hb: startHeartbeat(m, s.hbTick)}
	select {
	case s.work <- f:
	case <-s.quit:
		f.hb.stop()
		_ = m.Nak()
		<-s.slots
	}
}

func (s *Subscription) worker() {
	defer s.workers.Done()
	for {
		select {
		case f := <-s.work:
			if !s.spec.Limit.acquire(s.quit) {
				// Stopping while the shared limit was full: give the message back so
				// another instance takes it.
				f.hb.stop()
				_ = f.msg.Nak()
				<-s.slots
				continue
			}
			s.process(f)
			s.spec.Limit.release()
			<-s.slots
		case <-s.quit:
			return
		}
	}
}

// HandlerLimit bounds the handlers running at once across the consumers that share it
// ([ConsumerSpec.Limit]). A nil *HandlerLimit bounds nothing.
type HandlerLimit struct {
	once  sync.Once
	slots chan struct{}
}

// NewHandlerLimit returns a limit of n handlers at once (at least 1).
func NewHandlerLimit(n int) *HandlerLimit {
	l := &HandlerLimit{}
	l.size(n)
	return l
}

// size sets the limit to n handlers the first time it is called.
func (l *HandlerLimit) size(n int) {
	l.once.Do(func() { l.slots = make(chan struct{}, max(n, 1)) })
}

// acquire waits for a free handler slot, or until quit is closed (false).
func (l *HandlerLimit) acquire(quit <-chan struct{}) bool {
	if l == nil {
		return true
	}
	select {
	case l.slots <- struct{}{}:
		return true
	case <-quit:
		return false
	}
}

func (l *HandlerLimit) release() {
	if l != nil {
		<-l.slots
	}
}

func (s *Subscription) process(f *inflight) {
	defer f.hb.stop()
	m := f.msg
	d := Delivery{
		Msg:          m,
		Subject:      m.Subject(),
		NumDelivered: 1,
		MaxDeliver:   s.spec.MaxDeliver,
		Consumer:     s.spec.Durable,
		Stream:       s.spec.Stream,
	}
	if md, err := m.Metadata(); err == nil {
		d.NumDelivered, d.StreamSeq, d.Stream = md.NumDelivered, md.Sequence.Stream, md.Stream
	}
	expired := s.spec.Records && s.spec.Expiries && isExpiryMarker(m.Headers())
	if s.spec.Records && !expired && !s.recordWork(m.Headers()) {
		// A revision that hands nothing on to this consumer: not an event of its, so not
		// observed either. A lost acknowledgement only brings it back to be ignored again.
		if err := m.Ack(); err != nil {
			s.log.Debug().Err(err).Str("subject", d.Subject).Msg("acknowledgement of an ignored revision failed")
		}
		return
	}
	var ev cloudevent.Event
	var decErr error
	if expired {
		ev = cloudevent.Event{ID: fmt.Sprintf("%s:%d:expired", d.Stream, d.StreamSeq), Type: TypeRecordExpired, Subject: d.Subject}
	} else if ev, decErr = cloudevent.DecodeMsg(m.Headers(), m.Data()); decErr == nil {
		decErr = cloudevent.ExpectType(ev, s.spec.AcceptTypes...)
	}
	d.Event = ev
	log := s.log.With().Str("subject", d.Subject).Str("ce_id", ev.ID).Str("ce_type", ev.Type).
		Uint64("delivered", d.NumDelivered).Logger()
	ctx := log.WithContext(s.ctx)
	finish := func(Observation) {}
	if s.spec.Observer != nil {
		ctx, finish = s.spec.Observer.Begin(ctx, d)
	}

	if decErr != nil {
		var rej *contracts.Rejection
		if !errors.As(decErr, &rej) {
			rej = &contracts.Rejection{Code: CodePermanent, Message: decErr.Error()}
		}
		finish(s.reject(ctx, &log, f, d, rej))
		return
	}

	start := time.Now()
	hctx := ctx
	if s.spec.HandlerTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, s.spec.HandlerTimeout)
		defer cancel()
	}
	err := s.runHandler(hctx, d)
	ran := Observation{Err: err, Handled: true, HandlerDuration: time.Since(start)}
	if err == nil && s.spec.Fault != nil {
		if ferr := s.spec.Fault(ctx, FaultAfterHandlerBeforeAck, d); ferr != nil {
			f.hb.stop()
			log.Warn().Err(ferr).Str("fault", string(FaultAfterHandlerBeforeAck)).Msg("fault injected: message left unsettled")
			ran.Settlement = SettledAbandoned
			finish(ran)
			return
		}
	}
	o := s.settle(ctx, &log, f, d, err)
	ran.Settlement, ran.Code = o.Settlement, o.Code
	finish(ran)
}

// recordWork reports whether a revision on a Records consumer is work for it: written
// with CloudEvents headers (not a plain key-value write, delete or purge) and of a type it
// accepts.
func (s *Subscription) recordWork(h nats.Header) bool {
	if h == nil || h.Get(kvOperationHeader) != "" {
		return false
	}
	typ, ok, err := cloudevent.HeaderAttribute(h, cloudevent.HeaderType)
	if !ok {
		return false
	}
	if len(s.spec.AcceptTypes) == 0 {
		return true
	}
	if err != nil {
		return false
	}
	if slices.Contains(s.spec.AcceptTypes, typ) {
		return true
	}
	// Another format version of an accepted type is work this version cannot read, not a
	// revision for someone else: it is dead-lettered (unsupported_format), never ignored.
	_, other := contracts.OtherVersion(typ, s.spec.AcceptTypes...)
	return other
}

// TypeRecordExpired is the type of the Event a consumer with [ConsumerSpec.Expiries] is
// handed for a marker the server left where a record revision expired. It is never
// published: the bus makes it from the marker.
const TypeRecordExpired = "io.awaken.internal.record.expired.v1"

// isExpiryMarker reports whether a stored message with h is the marker the server leaves
// where a message aged out (a per-message TTL or the stream's max age), as opposed to a
// key-value delete or purge, or a marker of a removal.
func isExpiryMarker(h nats.Header) bool {
	return h != nil && h.Get(jetstream.MarkerReasonHeader) == "MaxAge"
}

// kvOperationHeader marks a key-value delete or purge marker.
const kvOperationHeader = "KV-Operation"

// runHandler calls the handler, turning a panic into a transient error.
func (s *Subscription) runHandler(ctx context.Context, d Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			zerolog.Ctx(ctx).Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).
				Msg("handler panicked; treating as a transient failure")
			err = fmt.Errorf("bus: handler panic: %v", r)
		}
	}()
	return s.h(ctx, d)
}

// callHook runs an OnReject/OnExhausted hook, turning a panic into an error.
func callHook(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bus: hook panic: %v", r)
		}
	}()
	return fn()
}
