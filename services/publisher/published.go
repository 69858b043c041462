package publisher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// clockSkew widens the search window of [Service.resultsPublished] before the batch's
// creation time, in case the batcher's clock ran ahead of the server's.
const clockSkew = 5 * time.Minute

// resultsPublished reports whether the results stream already holds the last message of
// rec's batch's publication — its results message, or the finalized event that ends the
// atomic batch of a batch too large for one message: if it is there, the whole batch is.
// Both ids are looked for, so the answer does not depend on which form this delivery
// would publish.
//
// The fast path reads the last message on the run's results subject. If that is another
// batch's message (a later step of the run was published since), the subject is scanned,
// headers only, from shortly before the batch was recorded — its results cannot be older.
// Only a delivery that found the batch already finalized gets here, so the scan is rare.
func (s *Service) resultsPublished(ctx context.Context, rec *contracts.BatchRecord) (bool, error) {
	sub := &rec.Submission
	subject := s.env.Names.ResultsSubject(sub.RunID)
	want := []string{pipeline.BatchResultsID(sub.BatchID()), pipeline.FinalizedID(sub.BatchID())}
	streamName := s.env.Names.Of(sub.RunID).ResultsStream()

	stream, err := s.env.JS.Stream(ctx, streamName)
	if err != nil {
		return false, fmt.Errorf("publisher: results stream %s: %w", streamName, err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("publisher: last message on %s: %w", subject, err)
	}
	if slices.Contains(want, eventID(last.Header)) {
		return true, nil
	}
	start := rec.CreatedAt.Add(-clockSkew)
	if last.Time.Before(start) {
		return false, nil // nothing on the subject is recent enough to be this batch's
	}
	return s.scanFor(ctx, streamName, subject, want, start, last.Sequence)
}

// scanFor reads the headers of the messages on subject from start up to stream sequence
// last and reports whether one of them has an event id of want.
func (s *Service) scanFor(ctx context.Context, streamName, subject string, want []string, start time.Time, last uint64) (bool, error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		HeadersOnly:    true,
	}
	if !start.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &start
	}
	// The message at sequence last is on subject and not older than start, so the scan
	// always ends.
	cons, err := s.env.JS.OrderedConsumer(ctx, streamName, cfg)
	if err != nil {
		return false, fmt.Errorf("publisher: scan %s: %w", subject, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return false, fmt.Errorf("publisher: scan %s: %w", subject, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("publisher: scan %s: %w", subject, ctx.Err())
			}
			return false, fmt.Errorf("publisher: scan %s: %w", subject, err)
		}
		if slices.Contains(want, eventID(m.Headers())) {
			return true, nil
		}
		md, err := m.Metadata()
		if err != nil {
			return false, fmt.Errorf("publisher: scan %s: %w", subject, err)
		}
		if md.Sequence.Stream >= last {
			return false, nil
		}
	}
}

// eventID is the CloudEvent id of a stored message, decoded from its headers ("" when the
// message is not a binary-mode CloudEvent).
func eventID(h nats.Header) string {
	ev, err := cloudevent.DecodeMsg(h, nil)
	if err != nil {
		return ""
	}
	return ev.ID
}
