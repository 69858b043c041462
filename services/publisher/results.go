package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// resultsMessage is the batch's io.awaken.toolbatch.results.v1 message on subject: every
// result of events in model order and the finalized payload fin (parts are the same as
// per-call events and the finalized event, as build made them), under the id
// [pipeline.BatchResultsID]. One stored message is atomic by construction and costs one
// write, where an atomic batch of the same messages costs the server a staging store (on a
// single node, about 13 synced publishes whatever its size). It returns nil when the
// message would exceed the largest publishable message: the batch then goes out as the
// atomic batch of its per-call events, each of which fits (build checked them).
func (s *Service) resultsMessage(ctx context.Context, subject string, events []contracts.ToolResultEvent, fin contracts.BatchFinalized, parts []bus.Outgoing) (*bus.Outgoing, error) {
	// The one message holds every part's data: when those alone exceed the limit it is not
	// encoded at all (a large batch's outputs may be megabytes).
	limit, sum := s.maxMessage(), 0
	for _, p := range parts {
		sum += len(p.Event.Data)
	}
	if sum > limit {
		zerolog.Ctx(ctx).Info().Int("bytes", sum).Int("limit", limit).Int("results", len(events)).
			Msg("the batch's results exceed one message; publishing them as an atomic batch of per-call events")
		return nil, nil
	}
	o, err := s.event(subject, pipeline.BatchResultsID(fin.BatchID), contracts.TypeBatchResults, contracts.BatchResults{
		BatchID: fin.BatchID, RunID: fin.RunID, Results: events, Finalized: fin,
	})
	if err != nil {
		return nil, err
	}
	if size := messageSize(o); size > limit {
		zerolog.Ctx(ctx).Info().Int("bytes", size).Int("limit", limit).Int("results", len(events)).
			Msg("the batch's results exceed one message; publishing them as an atomic batch of per-call events")
		return nil, nil
	}
	return &o, nil
}

// publishResults publishes the results of rec's batch — its one results message, or the
// atomic batch when the batch is too large for one — unless they are already on the
// results stream. finalizedBefore says a delivery before this one finalized the batch and
// may have published it before dying: past the duplicate window only the stream itself
// can say, so it is searched first. Within the window the stream refuses a re-publication
// by its deterministic ids (a duplicate acknowledgement of the one message, or
// [bus.ErrAtomicDuplicate] of the atomic batch), which is taken as "already published".
func (s *Service) publishResults(ctx context.Context, rec *contracts.BatchRecord, pub publication, finalizedBefore bool) error {
	log := zerolog.Ctx(ctx)
	batchID := rec.Submission.BatchID()
	if finalizedBefore {
		already, err := s.resultsPublished(ctx, rec)
		if err != nil {
			return err
		}
		if already {
			log.Info().Msg("results already on the results stream; not publishing them again")
			return nil
		}
	}
	if pub.single != nil {
		ack, err := s.env.Pub.Publish(ctx, pub.single.Subject, pub.single.Event)
		switch {
		case err != nil:
			return fmt.Errorf("publisher: publish results of %s: %w", batchID, err)
		case ack.Duplicate:
			log.Info().Msg("results already published (refused as a duplicate)")
		}
		return nil
	}
	err := s.env.Pub.PublishAtomic(ctx, pub.results)
	switch {
	case errors.Is(err, bus.ErrAtomicDuplicate):
		log.Info().Msg("results already published (refused as a duplicate)")
	case err != nil:
		return fmt.Errorf("publisher: publish results of %s: %w", batchID, err)
	}
	return nil
}
