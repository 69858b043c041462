// Package batcher is the ingress of the awaken pipeline.
//
// It validates every submitted batch and persists it as one batch record — the whole
// submission, its hash, and for every call the target, kind and recovery policy pinned
// from the trusted host configuration — before any gate runs. Recording the batch is one
// compare-and-swap on its run record, which also claims the run for it, and that revision
// is the gate's work for the batch: the batcher publishes nothing else for an accepted
// batch. (Sequential dispatch — the gate of call i+1 once call i is terminal — is the
// gate's, from the call records' stream.)
//
// Ingress failures never stop the consumer: a submission that does not decode, that
// violates the protocol, or that reuses a batch id with different content is answered
// with io.awaken.toolbatch.rejected.v1 on the rejected subject, and the raw message is
// kept on the dead-letter stream with the reason.
//
// Exactly once: the batch record is written by compare-and-swap, so a resubmission (a
// redelivery, or the platform sending the batch again) finds it and either does nothing
// but tell the submitter so, with io.awaken.toolbatch.unchanged.v1 on the run's unchanged
// subject (same hash: its recording was the gate's work already), or is refused with code
// conflict (other hash).
package batcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ServiceName names the batcher in CloudEvent sources ("awaken/batcher"), logs and fault
// hooks.
//
// Fault points (see [pipeline.FaultHook]): on a submission, FaultAfterCommit fires after
// the batch record is durable, with the batch id as the operation.
const ServiceName = contracts.ServiceBatcher

// Service is a running batcher. Several replicas may run against one server: they share
// the durable consumers, and the batch record's Create decides between them.
type Service struct {
	env       Deps
	log       zerolog.Logger
	consumers *bus.Consumers
}

// Start ensures the batcher's durable consumer of submissions
// ([contracts.ConsumerBatcherSubmit] on the submit subject) and starts consuming. ctx is
// the hard-stop context of the handlers; use [Service.Stop] for a graceful stop.
//
// opts adjust the delivery of its consumer: [bus.WithWorkers], [bus.WithDelivery],
// [bus.WithAckWait].
func Start(ctx context.Context, env Deps, opts ...bus.DeliveryOption) (*Service, error) {
	if env.Runtime == nil {
		return nil, errors.New("batcher: start: no runtime")
	}
	delivery := env.Delivery(bus.ServiceDelivery(), opts...)
	s := &Service{env: env, log: env.Log}
	n := env.Names
	routes := []bus.Route{
		{Spec: bus.ConsumerSpec{
			Stream: n.SubmissionsStream(), Durable: contracts.ConsumerBatcherSubmit,
			FilterSubjects: []string{n.SubmitSubject()},
			AcceptTypes:    []string{contracts.TypeBatchRequested},
			OnReject:       s.submitRejected,
			OnExhausted:    s.submitExhausted,
		}, Handler: env.Handle(ServiceName, s.handleSubmit)},
	}
	var err error
	s.consumers, err = env.StartConsumers(ctx, delivery, routes, s.log)
	if err != nil {
		return nil, fmt.Errorf("batcher: start: %w", err)
	}
	return s, nil
}

// Stop drains the consumer gracefully — stop pulling, let the handlers in flight finish
// and settle — bounded by ctx. It is safe to call more than once.
func (s *Service) Stop(ctx context.Context) error { return s.consumers.Stop(ctx) }
