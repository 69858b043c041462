package batcher

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// event builds an outgoing event of the batcher with a deterministic id.
func (s *Service) event(subject, id, typ string, payload any) (bus.Outgoing, error) {
	ev, err := s.env.Event(ServiceName, id, typ, payload)
	if err != nil {
		return bus.Outgoing{}, fmt.Errorf("batcher: build %s: %w", typ, err)
	}
	return bus.Outgoing{Subject: subject, Event: ev}, nil
}

// firstRequest is what starts a batch: the probe of a parallel-delegation batch, else the
// gate request of call 0.
func (s *Service) firstRequest(rec *contracts.BatchRecord) (bus.Outgoing, error) {
	return s.gateRequest(rec, 0, rec.Parallel)
}

// gateRequest is the gate request of call i of rec (id "{op}:gate"), or with probe the
// parallel-delegation probe of the whole batch (id "{batch_id}:probe").
func (s *Service) gateRequest(rec *contracts.BatchRecord, i int, probe bool) (bus.Outgoing, error) {
	sub := &rec.Submission
	id := pipeline.GateRequestID(contracts.OperationID(sub.RunID, sub.Step, sub.Calls[i].CallID))
	if probe {
		id = pipeline.ProbeID(sub.BatchID())
	}
	return s.event(s.env.Names.GateRequestSubject(sub.RunID), id, contracts.TypeGateRequest,
		contracts.GateRequest{RunID: sub.RunID, Step: sub.Step, Index: i, Probe: probe})
}

// publishRejected publishes io.awaken.toolbatch.rejected.v1 with id on the rejected subject.
func (s *Service) publishRejected(ctx context.Context, id string, payload contracts.BatchRejected) error {
	o, err := s.event(s.env.Names.RejectedSubject(), id, contracts.TypeBatchRejected, payload)
	if err != nil {
		return err
	}
	if _, err := s.env.Pub.Publish(ctx, o.Subject, o.Event); err != nil {
		return fmt.Errorf("batcher: publish rejection %s: %w", id, err)
	}
	return nil
}
