// Package gate is the permission gate of the awaken pipeline.
//
// For every call of a batch, in model order, it runs the gate chain — client execution,
// run narrowing, the per-run policy, the host policy, visibility and availability, the
// host's fixed results — records the decision on the call, and applies it: an allowed call
// is committed Executing{1} and sent to the executor of its trusted target; a blocked or
// fixed-result call completes at once; a call that needs approval or is scheduled parks on
// a durable ticket with a JetStream-scheduled timer; a client-executed call parks until
// the client supplies its result. It also resolves tickets (resume commands, due times,
// approval deadlines) and seals the open batches of cancelled runs.
//
// Every handler follows the pipeline rule — commit state by compare-and-swap, publish with
// deterministic message ids, then acknowledge — so a redelivered input finds its work
// recorded and only re-publishes. The gate never reads placement from a call's arguments
// or from the submission: an executor request goes to the target the batcher pinned from
// the trusted configuration.
package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ServiceName names the gate in CloudEvent sources ("awaken/gate"), logs and fault hooks.
const ServiceName = "gate"

// Consumer settings. A gate handler does a few KV round trips and publishes, so 30 s of
// ack wait is generous; the back-off starts at 100 ms so a crash is repaired quickly and
// grows so a broken dependency is not hammered.
const (
	ackWait    = 30 * time.Second
	maxDeliver = 10
)

// backOff is the nak delay after the n-th failed delivery.
var backOff = []time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
}

// Reasons of calls sealed because a gate input failed on every delivery: the call becomes
// Indeterminate with a reason naming the stage, so its batch still finishes (the others
// are in dispatch.go).
const (
	exhaustedTimer = "gate: the ticket timer failed on every delivery"
)

// Option configures [Start].
type Option func(*options)

type options struct {
	workers         int
	policyCacheSize int
	ackWait         time.Duration
}

// WithWorkers sets how many messages each of the gate's consumers handles at once in this
// process (default 4). Handlers of one call serialise through compare-and-swap, so any
// value is safe.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithAckWait sets how long the server waits for a settlement of any gate input before
// redelivering it (default 30 s; 0 keeps the default). Running handlers are heartbeated,
// so it only bounds how long a crashed process holds a message; tests and chaos runs
// shorten it so a killed gate's messages come back within seconds.
func WithAckWait(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ackWait = d
		}
	}
}

// WithPolicyCacheSize bounds the number of compiled run policies kept (default 4096).
func WithPolicyCacheSize(n int) Option { return func(o *options) { o.policyCacheSize = n } }

// Service is a running gate. Several replicas may run against one server: they share the
// durable consumers and coordinate through the call records' compare-and-swap.
type Service struct {
	env         *pipeline.Env
	host        *contracts.Policy
	runPolicies *policyCache
	limits      *limiter
	log         zerolog.Logger
	consumers   *bus.Consumers
}

// Start compiles the host policy of env.Config (an invalid host policy fails Start), then
// ensures the gate's durable consumers and starts consuming: recorded batches
// ([contracts.ConsumerGateBatches], on the run records' stream), call outputs
// ([contracts.ConsumerGateOutputs], on the call records' stream; see dispatch.go), resume
// commands ([contracts.ConsumerGateResume]),
// ticket timers ([contracts.ConsumerGateTimers]) and control commands — run and call
// cancellations, call resolutions ([contracts.ConsumerGateControl]). ctx is the hard-stop context of the handlers; use
// [Service.Stop] for a graceful stop.
func Start(ctx context.Context, env *pipeline.Env, opts ...Option) (*Service, error) {
	o := options{workers: 4, ackWait: ackWait}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := newService(env, o)
	if err != nil {
		return nil, err
	}
	n := env.Names
	routes := []bus.Route{
		{Spec: bus.ConsumerSpec{
			Stream: n.RunRecordsStream(), Durable: contracts.ConsumerGateBatches,
			FilterSubjects: []string{n.RunRecordsFilter()},
			AcceptTypes:    []string{contracts.TypeBatchRecorded}, Records: true,
			OnExhausted: s.recordedExhausted,
		}, Handler: s.handleRecorded},
		{Spec: bus.ConsumerSpec{
			Stream: n.CallRecordsStream(), Durable: contracts.ConsumerGateOutputs,
			FilterSubjects: []string{n.CallRecordsFilter()},
			AcceptTypes:    []string{contracts.TypeCallOutput}, Records: true,
			OnExhausted: s.outputExhausted,
		}, Handler: s.handleOutput},
		{Spec: bus.ConsumerSpec{
			Stream: n.TicketsStream(), Durable: contracts.ConsumerGateResume,
			// Both resume subjects on one durable: the public one (claimed actors) and
			// the api's (authenticated actors); [Service.onResume] tells them apart.
			FilterSubjects: []string{n.TicketResumeSubject(), n.TicketResumeAPISubject()},
			AcceptTypes:    []string{contracts.TypeTicketResume},
			OnReject:       s.resumeRejected,
		}, Handler: s.onResume},
		{Spec: bus.ConsumerSpec{
			Stream: n.TimersStream(), Durable: contracts.ConsumerGateTimers,
			FilterSubjects: []string{n.TicketExpireSubject()},
			AcceptTypes:    []string{contracts.TypeTicketExpire},
			OnExhausted:    s.timerExhausted,
		}, Handler: s.onTimer},
		{Spec: bus.ConsumerSpec{
			Stream: n.ControlStream(), Durable: contracts.ConsumerGateControl,
			FilterSubjects: []string{n.RunCancelSubject(), n.CallCancelSubject(), n.CallResolveSubject()},
			AcceptTypes:    []string{contracts.TypeRunCancel, contracts.TypeCallCancel, contracts.TypeCallResolve},
		}, Handler: s.onCancel},
	}
	if r, ok := s.limitReleaseRoute(); ok {
		routes = append(routes, r)
	}
	s.consumers, err = bus.Start(ctx, env.JS, env.Delivery(bus.DeliveryOptions{
		AckWait: o.ackWait, MaxDeliver: maxDeliver, BackOff: backOff, Workers: o.workers,
	}), routes, s.log)
	if err != nil {
		return nil, fmt.Errorf("gate: start: %w", err)
	}
	return s, nil
}

// newService builds a Service without consumers (tests drive its handlers directly).
func newService(env *pipeline.Env, o options) (*Service, error) {
	host, err := contracts.CompilePolicy(env.Config.Policy)
	if err != nil {
		return nil, fmt.Errorf("gate: host policy: %w", err)
	}
	return &Service{
		env:         env,
		host:        host,
		runPolicies: newPolicyCache(o.policyCacheSize),
		limits:      newLimiter(env, host),
		log:         env.Log,
	}, nil
}

// Stop drains every consumer gracefully — stop pulling, let the handlers in flight finish
// and settle — bounded by ctx. It is safe to call more than once.
func (s *Service) Stop(ctx context.Context) error { return s.consumers.Stop(ctx) }

// checkBatch verifies the shape the gate relies on: one pin per call.
func checkBatch(b *contracts.BatchRecord) error {
	if len(b.Pinned) != len(b.Submission.Calls) {
		return fmt.Errorf("gate: batch %s has %d pins for %d calls", b.Submission.BatchID(), len(b.Pinned), len(b.Submission.Calls))
	}
	return nil
}

// onResume adapts [Service.handleResume] to the bus. A command's actor is authenticated
// only when it came on the api's subject (deploy/nats/auth.conf lets no other user publish
// there); on the public subject it is the publisher's claim.
func (s *Service) onResume(ctx context.Context, d bus.Delivery) error {
	return s.handleResume(ctx, d.Event, d.Subject != s.env.Names.TicketResumeAPISubject())
}

// resumeRejected answers a resume command the bus or the decoder refused (wrong type,
// undecodable envelope or payload) before it is dead-lettered.
func (s *Service) resumeRejected(ctx context.Context, d bus.Delivery, rej *contracts.Rejection) error {
	id := d.Event.ID
	if id == "" {
		// The envelope itself did not decode; answer under an id derived from the stream
		// position so the answer is still deduplicated.
		id = fmt.Sprintf("%s-%d", d.Stream, d.StreamSeq)
	}
	return s.publishRejection(ctx, id, contracts.TicketResolution{Code: string(rej.Code), Message: rej.Message})
}

// onTimer adapts [Service.handleTimer] to the bus.
func (s *Service) onTimer(ctx context.Context, d bus.Delivery) error {
	return s.handleTimer(ctx, d.Event)
}

// timerExhausted makes the call of a timer that failed on every delivery Indeterminate,
// clears its ticket and publishes its CallOutput, so a parked batch does not wait forever.
func (s *Service) timerExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	tm, err := bus.Decode[contracts.TicketTimer](d.Event.Data)
	if err != nil {
		return nil
	}
	p, err := parseCorrelation(tm.CorrelationID)
	if err != nil {
		return nil
	}
	b, i, ok, err := s.locate(ctx, p)
	if err != nil || !ok {
		return err
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("correlation_id", tm.CorrelationID).Msg("ticket timer exhausted; sealing")
	return s.seal(ctx, b, i, exhaustedTimer, false)
}

// onCancel adapts [Service.handleCancel] to the bus.
func (s *Service) onCancel(ctx context.Context, d bus.Delivery) error {
	switch d.Event.Type {
	case contracts.TypeCallCancel:
		return s.handleCallCancel(ctx, d.Event)
	case contracts.TypeCallResolve:
		return s.handleCallResolve(ctx, d.Event)
	}
	return s.handleCancel(ctx, d.Event)
}
