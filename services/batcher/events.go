package batcher

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

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

// publishUnchanged tells the submitter of d, a submission of a batch recorded before with
// the same content (cur), that it was settled as a no-op: io.awaken.toolbatch.unchanged.v1
// on the run's unchanged subject. Without it a waiting submitter sees nothing at all — no
// results (they were published for the first submission, or will be), no rejection — and
// learns it only by asking. It is a core NATS publish: nothing is stored for a no-op, and
// a lost notice costs the submitter its question (pkg/client asks after a second), so a
// failed publish is logged and the submission still settled.
func (s *Service) publishUnchanged(ctx context.Context, d bus.Delivery, cur *contracts.BatchRecord) {
	sub := &cur.Submission
	eventID := submissionEventID(d)
	payload := contracts.BatchUnchanged{
		BatchID: sub.BatchID(), RunID: sub.RunID, EventID: eventID,
		Phase: cur.Phase, ResultsSubject: s.env.Names.ResultsSubject(sub.RunID),
	}
	o, err := s.event(s.env.Names.UnchangedSubject(sub.RunID), pipeline.UnchangedID(eventID), contracts.TypeBatchUnchanged, payload)
	if err == nil {
		if err = s.env.PublishNotice(o.Subject, o.Event); err != nil {
			err = fmt.Errorf("batcher: publish unchanged notice %s: %w", o.Event.ID, err)
		}
	}
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("the submitter was not told that its identical resubmission is a no-op; it finds out by asking")
	}
}
