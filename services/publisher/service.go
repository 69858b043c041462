// Package publisher is the publication barrier of the awaken pipeline: a batch's results
// are published once, atomically, after every call is terminal.
//
// It watches committed call outputs. When — and only when — every call of a batch is
// terminal, it finalizes the batch and releases its run (one compare-and-swap of the run
// record, which holds the open batch: open → finalized), publishes ONE
// io.awaken.toolbatch.results.v1 message on the run's results subject — every result in
// model order and the finalized payload, atomic by construction — sends the live
// tool_result facts (core NATS, a projection of the results, never stored), and archives
// the batch as published in the batches bucket. A batch whose results message would
// exceed the server's max payload is published instead as every io.awaken.tool.result.v1
// in model order followed by io.awaken.toolbatch.finalized.v1, in one atomic JetStream
// batch.
//
// Nothing of a batch is ever published twice (a live fact may be sent again by a
// redelivery before the archive; its readers deduplicate by id). Every message carries a deterministic id,
// so within the stream's duplicate window the server refuses a re-publication (a
// duplicate acknowledgement of the results message; [bus.ErrAtomicDuplicate] of an atomic
// batch, refused whole), which is treated as "already published". Past the window the
// batch record says what happened: a batch that was already finalized when a delivery
// started may have been published by a process that died before archiving it, so the
// results subject is searched for the batch's last message (results message or
// finalized event) before anything is published again.
package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ServiceName names the publisher in CloudEvent sources ("awaken/publisher"), logs and
// fault hooks.
//
// Fault points (see [pipeline.FaultHook]), both with the batch id as the operation:
// FaultAfterCommit fires after the batch is finalized (or found finalized) and before its
// results are published; FaultAfterPublish fires after the results publication (and the
// live tool_result facts sent after it) and before the archive.
const ServiceName = contracts.ServicePublisher

// unlimited is the publisher's only change to the pipeline's delivery: deliveries are
// unlimited, since the call of an output is already terminal, so nothing can be sealed on
// exhaustion, and giving up would leave the batch unpublished forever; a transient failure
// is retried on the pipeline's back-off, and a permanent one (a corrupt record) is
// dead-lettered at once.
var unlimited = bus.WithDelivery(-1)

// Service is a running publisher. Several replicas may run against one server: they
// share the durable consumer, and the batch record's compare-and-swap plus the results
// stream's deduplication keep the publication single.
type Service struct {
	env       Deps
	log       zerolog.Logger
	progress  *progressCache
	consumers *bus.Consumers
}

// Start ensures the publisher's durable consumer ([contracts.ConsumerPublisher] on every
// run's output subject) and starts consuming. ctx is the hard-stop context of the
// handlers; use [Service.Stop] for a graceful stop.
//
// opts adjust the delivery of its consumers: [bus.WithWorkers], [bus.WithDelivery],
// [bus.WithAckWait].
func Start(ctx context.Context, env Deps, opts ...bus.DeliveryOption) (*Service, error) {
	if env.Runtime == nil {
		return nil, errors.New("publisher: start: no runtime")
	}
	delivery := env.Delivery(bus.ServiceDelivery(), append([]bus.DeliveryOption{unlimited}, opts...)...)
	s := &Service{
		env:      env,
		log:      env.Log,
		progress: newProgressCache(defaultProgressEntries),
	}
	n := env.Names
	var err error
	// One durable on each partition's call records.
	s.consumers, err = env.StartConsumers(ctx, delivery, bus.PerPartition(n, func(pn contracts.Names) bus.Route {
		return bus.Route{Spec: bus.ConsumerSpec{
			Stream: pn.CallRecordsStream(), Durable: contracts.ConsumerPublisher,
			FilterSubjects: []string{pn.CallRecordsFilter()},
			AcceptTypes:    []string{contracts.TypeCallOutput}, Records: true,
			OnExhausted: s.outputExhausted,
		}, Handler: env.Handle(ServiceName, s.handleOutput)}
	}), s.log)
	if err != nil {
		return nil, fmt.Errorf("publisher: start: %w", err)
	}
	return s, nil
}

// Stop drains the consumer gracefully — stop pulling, let the handlers in flight finish
// and settle — bounded by ctx. It is safe to call more than once.
func (s *Service) Stop(ctx context.Context) error { return s.consumers.Stop(ctx) }

// outputExhausted runs only when a finite MaxDeliver was configured and an output kept
// failing. Its call is terminal already, so nothing can be sealed: the failure is logged
// loudly and the output dead-lettered; another output of the batch, or a replay of the
// dead letter, finishes the batch.
func (s *Service) outputExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	zerolog.Ctx(ctx).Error().Err(cause).Str("ce_id", d.Event.ID).
		Msg("call output exhausted at the publisher; its batch may stay unpublished until the output is replayed")
	return nil
}
