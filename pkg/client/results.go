package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Reading the results stream: a batch's published results, whole, in either form of a
// publication (SubmitAndWait's shortcut past the stream is in wait.go).

// BatchResult is the published outcome of one batch: one result per call in model order,
// then the finalized event. It is read from either form of a publication: the batch's one
// io.awaken.toolbatch.results.v1 message, or — for a batch too large for one message — the
// atomic batch of its io.awaken.tool.result.v1 events and its finalized event.
type BatchResult struct {
	BatchID   string
	Results   []contracts.ToolResultEvent
	Finalized contracts.BatchFinalized
	// Sequence is the results stream's sequence of the batch's last message (its results
	// message, or the finalized event that ends its atomic batch): where
	// [Client.FollowRun] resumes after this batch.
	Sequence uint64
}

// Await returns the published results of batch (runID, step), waiting until they appear.
// It reads the run's results subject from the start of the stream with an ordered
// consumer, so it works whether the results were published before or after the call.
func (c *Client) Await(ctx context.Context, runID string, step int64) (*BatchResult, error) {
	batchID := contracts.BatchID(runID, step)
	var found *BatchResult
	err := c.readResults(ctx, runID, 0, 0, func(b *BatchResult) bool {
		if b.BatchID == batchID {
			found = b
			return false
		}
		return true
	})
	if found != nil {
		return found, c.resolveBatch(ctx, found)
	}
	return nil, fmt.Errorf("client: awaiting %s: %w", batchID, err)
}

// ErrNotPublished is wrapped by [Client.Results] when the results stream does not hold
// the batch (yet).
var ErrNotPublished = errors.New("batch results not published")

// Results returns the published results of batch (runID, step) without waiting: it reads
// the run's results subject up to its last message at the time of the call, and returns
// an error wrapping [ErrNotPublished] when the batch is not among them.
func (c *Client) Results(ctx context.Context, runID string, step int64) (*BatchResult, error) {
	batchID := contracts.BatchID(runID, step)
	stream, err := c.resultsStream(ctx, runID)
	if err != nil {
		return nil, err
	}
	subject, err := c.resultsSubject(ctx, runID)
	if err != nil {
		return nil, err
	}
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("client: results of %s: %w", batchID, ErrNotPublished)
	}
	if err != nil {
		return nil, fmt.Errorf("client: results of %s: %w", batchID, err)
	}
	var found *BatchResult
	err = c.readResults(ctx, runID, 0, last.Sequence, func(b *BatchResult) bool {
		if b.BatchID == batchID {
			found = b
			return false
		}
		return true
	})
	switch {
	case found != nil:
		return found, c.resolveBatch(ctx, found)
	case errors.Is(err, errReadEnd):
		return nil, fmt.Errorf("client: results of %s: %w", batchID, ErrNotPublished)
	default:
		return nil, fmt.Errorf("client: results of %s: %w", batchID, err)
	}
}

// FollowRun calls yield with every batch of runID published on the results stream after
// stream sequence after (0 for the first batch of the run), in publication order, each
// whole (its results in model order and its finalized event) and with its
// [BatchResult.Sequence]; it keeps waiting for new batches until ctx ends or yield
// returns false. A follower that lost its place resumes exactly after the last batch it
// handled by passing that batch's Sequence as after: a batch is one message (or one
// atomic publish), so no batch is split across that point.
func (c *Client) FollowRun(ctx context.Context, runID string, after uint64, yield func(*BatchResult) bool) error {
	var resolveErr error
	err := c.readResults(ctx, runID, after, 0, func(b *BatchResult) bool {
		if resolveErr = c.resolveBatch(ctx, b); resolveErr != nil {
			return false
		}
		return yield(b)
	})
	if resolveErr != nil {
		return resolveErr
	}
	if errors.Is(err, errYieldStop) {
		return nil
	}
	return fmt.Errorf("client: following the results of %s: %w", runID, err)
}

// wholeBatch reports whether b holds a result for every call its finalized event names,
// in model order.
func wholeBatch(b *BatchResult) bool {
	if len(b.Results) != len(b.Finalized.CallIDs) {
		return false
	}
	for i, r := range b.Results {
		if r.CallID != b.Finalized.CallIDs[i] || r.Index != i {
			return false
		}
	}
	return true
}

// errReadEnd and errYieldStop end readResults: the message at its until sequence was
// read, or yield asked to stop.
var (
	errReadEnd   = errors.New("end of the results read")
	errYieldStop = errors.New("stopped by the reader")
)

// readResults reads the run's results subject with an ordered consumer, starting after
// stream sequence after, and calls yield with each batch as its results message (or the
// finalized event ending its atomic batch) arrives.
// It returns errYieldStop when yield returns false, errReadEnd once it has read the
// message at sequence until (when until > 0), or the error that ended the read (ctx's
// when ctx ended). It holds the results of at most the batches whose finalized event it
// has not read yet — one, since a batch is one atomic publish. A batch published as one
// results message is yielded as it is read.
func (c *Client) readResults(ctx context.Context, runID string, after, until uint64, yield func(*BatchResult) bool) error {
	n, err := c.runNames(ctx, runID)
	if err != nil {
		return fmt.Errorf("results consumer: %w", err)
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{n.ResultsSubject(runID)},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: orderedConsumerIdle,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	if until > 0 && until <= after {
		return errReadEnd
	}
	cons, err := c.js.OrderedConsumer(ctx, n.ResultsStream(), cfg)
	if err != nil {
		return fmt.Errorf("results consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(resultsHeartbeat))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	defer func() {
		it.Stop()
		c.deleteOrderedOn(n.ResultsStream(), cons)
	}()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()

	pending := map[string][]contracts.ToolResultEvent{}
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		var seq uint64
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
		if err == nil {
			switch ev.Type {
			case contracts.TypeToolResult:
				var r contracts.ToolResultEvent
				if err := json.Unmarshal(ev.Data, &r); err != nil {
					return fmt.Errorf("result %s: %w", ev.ID, err)
				}
				pending[r.BatchID] = append(pending[r.BatchID], r)
			case contracts.TypeBatchFinalized:
				var f contracts.BatchFinalized
				if err := json.Unmarshal(ev.Data, &f); err != nil {
					return fmt.Errorf("finalized %s: %w", ev.ID, err)
				}
				res := &BatchResult{BatchID: f.BatchID, Results: pending[f.BatchID], Finalized: f, Sequence: seq}
				delete(pending, f.BatchID)
				// A read that starts inside a batch (after a sequence that is not a
				// finalized event's) sees its end only: that batch is not yielded.
				if wholeBatch(res) && !yield(res) {
					return errYieldStop
				}
			case contracts.TypeBatchResults:
				var b contracts.BatchResults
				if err := json.Unmarshal(ev.Data, &b); err != nil {
					return fmt.Errorf("results %s: %w", ev.ID, err)
				}
				res := &BatchResult{BatchID: b.BatchID, Results: b.Results, Finalized: b.Finalized, Sequence: seq}
				delete(pending, b.BatchID)
				if wholeBatch(res) && !yield(res) {
					return errYieldStop
				}
			}
		}
		if until > 0 && seq >= until {
			return errReadEnd
		}
	}
}

// deleteOrderedOn deletes the server-side consumer of an ordered consumer of stream that
// is done, in the background: stopping the iterator leaves it on the server until its
// inactivity threshold, and every waiting client would otherwise hold one.
func (c *Client) deleteOrderedOn(stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.js.DeleteConsumer(ctx, stream, info.Name)
	}()
}

// resultsStream returns the handle of the results stream of run runID's partition,
// looked up once per client.
func (c *Client) resultsStream(ctx context.Context, runID string) (jetstream.Stream, error) {
	n, err := c.runNames(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	h, _ := c.results.LoadOrStore(n.ResultsStream(), &handle[jetstream.Stream]{})
	return h.(*handle[jetstream.Stream]).get("results stream", func() (jetstream.Stream, error) {
		return c.js.Stream(ctx, n.ResultsStream())
	})
}

// resultsSubject is the results subject of runID in its partition.
func (c *Client) resultsSubject(ctx context.Context, runID string) (string, error) {
	n, err := c.runNames(ctx, runID)
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	return n.ResultsSubject(runID), nil
}
