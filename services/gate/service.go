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
	"sync"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/limits"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// ServiceName names the gate in CloudEvent sources ("awaken/gate"), logs and fault hooks.
const ServiceName = contracts.ServiceGate

// Reasons of calls sealed because a gate input failed on every delivery: the call becomes
// Indeterminate with a reason naming the stage, so its batch still finishes (the others
// are in dispatch.go).
const (
	exhaustedTimer = "gate: the ticket timer failed on every delivery"
)

// policyCacheSize bounds the number of compiled run policies kept.
const policyCacheSize = 4096

// Service is a running gate. Several replicas may run against one server: they share the
// durable consumers and coordinate through the call records' compare-and-swap.
type Service struct {
	env         Deps
	host        *contracts.Policy
	runPolicies *policyCache
	limits      *limits.Ledger
	tickets     *tickets.Handler
	log         zerolog.Logger
	consumers   *bus.Consumers
	// sweepStreams holds the record streams the sweep purges, by bucket, looked up once.
	sweepStreams sync.Map
	// stopCheckpoints ends the audit checkpointer ([Service.checkpointLoop]).
	stopCheckpoints context.CancelFunc
}

// Start compiles the host policy of env.Config (an invalid host policy fails Start), then
// ensures the gate's durable consumers and starts consuming: recorded batches
// ([contracts.ConsumerGateBatches], on the run records' stream), call outputs
// ([contracts.ConsumerGateOutputs], on the call records' stream; see dispatch.go), resume
// commands ([contracts.ConsumerGateResume]),
// ticket timers ([contracts.ConsumerGateTimers]) and control commands — run and call
// cancellations, call resolutions ([contracts.ConsumerGateControl]). ctx is the hard-stop context of the handlers; use
// [Service.Stop] for a graceful stop.
//
// opts adjust the pipeline's delivery ([bus.ServiceDelivery]) for every gate consumer.
func Start(ctx context.Context, env Deps, opts ...bus.DeliveryOption) (*Service, error) {
	s, err := newService(env)
	if err != nil {
		return nil, err
	}
	n := env.Names
	// The record streams exist once per partition: one durable on each.
	routes := bus.PerPartition(n, func(pn contracts.Names) bus.Route {
		return bus.Route{Spec: bus.ConsumerSpec{
			Stream: pn.RunRecordsStream(), Durable: contracts.ConsumerGateBatches,
			FilterSubjects: []string{pn.RunRecordsFilter()},
			AcceptTypes:    []string{contracts.TypeBatchRecorded}, Records: true,
			OnExhausted: s.recordedExhausted,
		}, Handler: env.Handle(ServiceName, s.handleRecorded)}
	})
	routes = append(routes, bus.PerPartition(n, func(pn contracts.Names) bus.Route {
		return bus.Route{Spec: bus.ConsumerSpec{
			Stream: pn.CallRecordsStream(), Durable: contracts.ConsumerGateOutputs,
			FilterSubjects: []string{pn.CallRecordsFilter()},
			AcceptTypes:    []string{contracts.TypeCallOutput}, Records: true,
			OnExhausted: s.outputExhausted,
		}, Handler: env.Handle(ServiceName, s.handleOutput)}
	})...)
	routes = append(routes, []bus.Route{
		{Spec: bus.ConsumerSpec{
			Stream: n.ControlStream(), Durable: contracts.ConsumerGateResume,
			// Both resume subjects on one durable: the public one (claimed actors) and
			// the api's (authenticated actors); [tickets.Handler.HandleResume] tells them apart:
			// deploy/nats/auth.conf lets no other user publish on the api's.
			FilterSubjects: []string{n.TicketResumeSubject(), n.TicketResumeAPISubject()},
			AcceptTypes:    []string{contracts.TypeTicketResume},
			OnReject:       s.tickets.ResumeRejected,
		}, Handler: env.Handle(ServiceName, s.tickets.HandleResume)},
		{Spec: bus.ConsumerSpec{
			Stream: n.TimersStream(), Durable: contracts.ConsumerGateTimers,
			FilterSubjects: []string{n.TicketExpireSubject()},
			AcceptTypes:    []string{contracts.TypeTicketExpire},
			OnExhausted:    s.timerExhausted,
		}, Handler: env.Handle(ServiceName, s.tickets.HandleTimer)},
		{Spec: bus.ConsumerSpec{
			Stream: n.ControlStream(), Durable: contracts.ConsumerGateControl,
			FilterSubjects: []string{n.RunCancelSubject(), n.CallCancelSubject(), n.CallResolveSubject()},
		}, ByType: map[string]bus.Handler{
			contracts.TypeRunCancel:   env.Handle(ServiceName, s.handleRunCancel),
			contracts.TypeCallCancel:  env.Handle(ServiceName, s.handleCallCancel),
			contracts.TypeCallResolve: env.Handle(ServiceName, s.handleCallResolve),
		}},
	}...)
	routes = append(routes, s.limitReleaseRoutes()...)
	routes = append(routes, s.sweepRoutes()...)
	routes = append(routes, s.runSweepRoutes()...)
	s.consumers, err = env.StartConsumers(ctx, env.Delivery(bus.ServiceDelivery(), opts...), routes, s.log)
	if err != nil {
		return nil, fmt.Errorf("gate: start: %w", err)
	}
	cpCtx, cancel := context.WithCancel(ctx)
	s.stopCheckpoints = cancel
	go s.checkpointLoop(cpCtx)
	return s, nil
}

// newService builds a Service without consumers (tests drive its handlers directly).
func newService(env Deps) (*Service, error) {
	host, err := contracts.CompilePolicy(env.Config.Policy)
	if err != nil {
		return nil, fmt.Errorf("gate: host policy: %w", err)
	}
	s := &Service{
		env:         env,
		host:        host,
		runPolicies: newPolicyCache(policyCacheSize),
		limits:      limits.New(env.Limits, host),
		log:         env.Log,
	}
	s.tickets = tickets.New(env.Tickets, ticketDispatch{s})
	return s, nil
}

// Stop drains every consumer gracefully — stop pulling, let the handlers in flight finish
// and settle — bounded by ctx. It is safe to call more than once.
func (s *Service) Stop(ctx context.Context) error {
	if s.stopCheckpoints != nil {
		s.stopCheckpoints()
	}
	return s.consumers.Stop(ctx)
}

// checkBatch verifies the shape the gate relies on: one pin per call.
func checkBatch(b *contracts.BatchRecord) error {
	if len(b.Pinned) != len(b.Submission.Calls) {
		return fmt.Errorf("gate: batch %s has %d pins for %d calls", b.Submission.BatchID(), len(b.Pinned), len(b.Submission.Calls))
	}
	return nil
}

// timerExhausted makes the call of a timer that failed on every delivery Indeterminate,
// clears its ticket and publishes its CallOutput, so a parked batch does not wait forever.
func (s *Service) timerExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	tm, err := bus.Decode[contracts.TicketTimer](d.Event.Data)
	if err != nil {
		return nil
	}
	p, err := tickets.ParseCorrelation(tm.CorrelationID)
	if err != nil {
		return nil
	}
	b, i, ok, err := s.tickets.Locate(ctx, p)
	if err != nil || !ok {
		return err
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("correlation_id", tm.CorrelationID).Msg("ticket timer exhausted; sealing")
	return s.seal(ctx, b, i, exhaustedTimer, false)
}
