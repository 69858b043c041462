package batcher

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
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
