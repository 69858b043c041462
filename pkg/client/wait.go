package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// How SubmitAndWait waits. The results stream republishes every message it stores on
// {prefix}.committed.results.{run}, so a client that subscribed there before submitting
// sees its batch, committed, without creating a consumer: one round trip for the
// submission and nothing else. A plain subscription is at-most-once, though, so the
// stream stays the authority:
//
//   - the batch seen on the subscription is accepted only when it is whole (a result for
//     every call the finalized event names, in model order) — one results message is
//     whole by construction, an atomic batch of per-call events may arrive incomplete;
//   - the stream is read instead whenever the subscription may have missed something: the
//     batch arrived incomplete, the connection reconnected, the subscription dropped
//     messages, or nothing arrived for streamHedgeAfter (a message lost on a cluster
//     route leaves no other trace).
const (
	// streamHedgeAfter is how long SubmitAndWait trusts the subscription alone. A batch
	// that waits longer (an approval, a slow tool) is then also read from the stream,
	// which costs one ordered consumer for as long as it waits.
	streamHedgeAfter = 5 * time.Second
	// subscriptionCheckEvery is how often the subscription's health (reconnects, drops)
	// is checked while waiting.
	subscriptionCheckEvery = 250 * time.Millisecond
	// identicalContentCheckAfter is when SubmitAndWait starts asking whether the batcher
	// settled the submission without new results (identical content submitted before
	// under another event id). The batcher says so at once on the run's unchanged subject;
	// the question is for a notice lost on the way (a plain publish is at-most-once). Most
	// batches are done by then, so it costs nothing in the common case.
	identicalContentCheckAfter = time.Second
	// orderedConsumerIdle bounds how long an ordered results consumer outlives a client
	// that vanished without deleting it (the server's default is five minutes, and a
	// stream holds at most 1,000 consumers by default).
	orderedConsumerIdle = 30 * time.Second
	// resultsHeartbeat is how often the server tells a results reader its pull request is
	// alive; two missed in a row make the reader replace its consumer. In a cluster, the
	// first pull request on a freshly created consumer is sometimes never registered by
	// the node hosting it (seen after a node stopped: the consumer holds the batch's
	// messages, no request waits on it), and with nats.go's default of 5 s for ordered
	// consumers each such read stalled 10 s — enough of them in a row ran a wait out.
	resultsHeartbeat = time.Second
)

// ErrPending is wrapped by [Client.SubmitAndWait]'s [*PendingError] when the submission was stored but the
// wait ended (ctx, or [WaitAtMost]) before the batch's results or rejection arrived: the
// batch will still run, and its results can be read later ([Client.Await],
// [Client.Results]).
var ErrPending = errors.New("batch still pending")

// PendingError is the error of [Client.SubmitAndWait] when the wait ended before the
// batch's results or rejection (it wraps [ErrPending], and the context's error when the
// context ended the wait): the batch was stored and will still run. Tickets are the
// batch's open tickets when the wait ended, oldest first — the calls parked on an
// approval, a schedule or a client's execution, which is what holds a batch that waits
// long; empty when none is open (or they could not be read).
type PendingError struct {
	BatchID string
	Tickets []contracts.ResumeTicket
	// why says how the wait ended (" after 2s", ": context deadline exceeded"); cause is the
	// context's error when the context ended it.
	why   string
	cause error
}

func (e *PendingError) Error() string {
	msg := fmt.Sprintf("client: awaiting %s: %v%s", e.BatchID, ErrPending, e.why)
	for i, t := range e.Tickets {
		sep := ", "
		if i == 0 {
			sep = "; waiting on ticket "
		}
		msg += fmt.Sprintf("%s%s (call %s, tool %s, %s)", sep, t.CorrelationID, t.CallID, t.ToolID, t.Reason)
	}
	return msg
}

func (e *PendingError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrPending, e.cause}
	}
	return []error{ErrPending}
}

// pendingTicketsTimeout bounds the read of a pending batch's tickets, made after the
// wait (maybe its context) ended.
const pendingTicketsTimeout = 2 * time.Second

// pending is the [PendingError] of batch (runID, step), with its open tickets.
func (c *Client) pending(ctx context.Context, runID string, step int64, why string, cause error) *PendingError {
	e := &PendingError{BatchID: contracts.BatchID(runID, step), why: why, cause: cause}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingTicketsTimeout)
	defer cancel()
	if ts, err := c.BatchTickets(tctx, runID, step); err == nil {
		e.Tickets = ts
	}
	return e
}

// WaitOption configures [Client.SubmitAndWait].
type WaitOption func(*waitOptions)

type waitOptions struct {
	atMost  time.Duration
	eventID string
}

// WithEventID submits under eventID instead of [SubmissionEventID] (see
// [Client.SubmitAs]); the rejection awaited is the one carrying eventID.
func WithEventID(eventID string) WaitOption {
	return func(o *waitOptions) { o.eventID = eventID }
}

// WaitAtMost bounds the wait that follows the submission: d after the stream stored it,
// SubmitAndWait returns an error wrapping [ErrPending]. Unlike a deadline on ctx it never
// cuts the submission itself short.
func WaitAtMost(d time.Duration) WaitOption {
	return func(o *waitOptions) { o.atMost = max(d, 0) }
}

// SubmitAndWait submits a batch and waits for its results, or for its rejection (a
// [*RejectedError]). A rejection is matched by the submission's event id, so the refusal
// of another submission under the same batch id is never taken for this one's. A batch
// recorded before with the same content returns its results, at once when it has
// finished: the batcher says the submission was a no-op, and the results are read from
// the stream.
func (c *Client) SubmitAndWait(ctx context.Context, sub contracts.BatchSubmission, opts ...WaitOption) (*BatchResult, error) {
	var o waitOptions
	o.atMost = -1
	for _, opt := range opts {
		opt(&o)
	}
	batchID := sub.BatchID()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// A rejection is matched to this submission by its event id, never by the batch id
	// alone: a conflicting or malformed submission that names the same batch is rejected
	// under its own event id while this one is accepted and runs.
	eventID := SubmissionEventID(sub)
	if o.eventID != "" {
		eventID = o.eventID
	}
	rejected, rs, err := watchFirst(c.nc, c.names.RejectedSubject(), func(r contracts.BatchRejected) bool {
		return r.EventID == eventID
	})
	if err != nil {
		return nil, fmt.Errorf("client: watch rejections: %w", err)
	}
	defer rs.Unsubscribe()
	// Identical content of a batch the batcher holds already is settled without new
	// results or a rejection; the batcher says so on the run's unchanged subject, matched
	// by event id like a rejection.
	unchanged, us, err := watchFirst(c.nc, c.names.UnchangedSubject(sub.RunID), func(u contracts.BatchUnchanged) bool {
		return u.EventID == eventID && u.BatchID == batchID
	})
	if err != nil {
		return nil, fmt.Errorf("client: watch unchanged notices: %w", err)
	}
	defer us.Unsubscribe()
	watch := newBatchWatch(batchID, c.dropResult)
	ws, err := c.nc.Subscribe(c.names.CommittedResultsSubject(sub.RunID), watch.deliver)
	if err != nil {
		return nil, fmt.Errorf("client: watch results: %w", err)
	}
	defer ws.Unsubscribe()
	// No flush is needed before the submission: the server handles a connection's
	// protocol in order, so the subscriptions are in place before the submission is
	// stored — and nothing about this batch can be published before that.
	reconnects := c.nc.Stats().Reconnects

	ev, err := cloudevent.NewEvent(eventID, c.source, contracts.TypeBatchRequested, sub)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ack, err := c.js.PublishMsg(ctx, cloudevent.EncodeMsg(c.names.SubmitSubject(), ev))
	if err != nil {
		return nil, fmt.Errorf("client: submit %s: %w", batchID, err)
	}

	type awaited struct {
		res *BatchResult
		err error
	}
	fromStream := make(chan awaited, 1)
	var streamOnce sync.Once
	readStream := func() {
		streamOnce.Do(func() {
			go func() {
				res, err := c.Await(ctx, sub.RunID, sub.Step)
				fromStream <- awaited{res, err}
			}()
		})
	}
	if ack.Duplicate {
		// This exact content was submitted before: its results may be anywhere.
		readStream()
	}
	// Identical content submitted earlier under another event id is a no-op for the
	// batcher (no new results, no rejection), which it says on the unchanged subject. In
	// case that notice was lost: once the batcher has settled this message without
	// rejecting it, look whether the run's last results are this batch's. (Older ones,
	// with later batches of the run after them, are found by the hedge.)
	checkAfter := identicalContentCheckAfter
	if c.identicalCheckAfter > 0 {
		checkAfter = c.identicalCheckAfter
	}
	settled := make(chan struct{})
	go func() {
		select {
		case <-time.After(checkAfter):
		case <-ctx.Done():
			return
		}
		if c.waitSettled(ctx, ack.Sequence) == nil && c.nc.FlushWithContext(ctx) == nil {
			close(settled)
		}
	}()

	var waitEnded <-chan time.Time
	if o.atMost >= 0 {
		t := time.NewTimer(o.atMost)
		defer t.Stop()
		waitEnded = t.C
	}
	finalized := watch.finalized
	noticed := unchanged
	hedgeAfter := streamHedgeAfter
	if c.hedgeAfter > 0 {
		hedgeAfter = c.hedgeAfter
	}
	hedge := time.NewTimer(hedgeAfter)
	defer hedge.Stop()
	check := time.NewTicker(subscriptionCheckEvery)
	defer check.Stop()
	for {
		select {
		case r := <-rejected:
			return nil, &RejectedError{r}
		case a := <-fromStream:
			return a.res, a.err
		case <-ctx.Done():
			return nil, c.pending(ctx, sub.RunID, sub.Step, ": "+ctx.Err().Error(), ctx.Err())
		case <-waitEnded:
			return nil, c.pending(ctx, sub.RunID, sub.Step, " after "+o.atMost.String(), nil)
		case u := <-noticed:
			noticed = nil
			// An open batch's results are still to come on the subscription.
			if u.Finished() {
				readStream()
			}
		case <-settled:
			settled = nil
			select {
			case r := <-rejected:
				return nil, &RejectedError{r}
			default:
				if f, err := c.lastFinalized(ctx, sub.RunID); err == nil && f != nil && f.BatchID == batchID {
					readStream()
				}
			}
		case <-finalized:
			finalized = nil
			if res, ok := watch.whole(); ok {
				return res, c.resolveBatch(ctx, res)
			}
			readStream()
		case <-hedge.C:
			readStream()
		case <-check.C:
			dropped, err := ws.Dropped()
			if err != nil || dropped > 0 || c.nc.Stats().Reconnects != reconnects {
				readStream()
			}
		}
	}
}

// watchFirst subscribes to subject and hands on the first event whose data, decoded as T,
// matches: the channel holds one, and later matches are dropped.
func watchFirst[T any](nc *nats.Conn, subject string, match func(T) bool) (<-chan T, *nats.Subscription, error) {
	first := make(chan T, 1)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			return
		}
		var v T
		if json.Unmarshal(ev.Data, &v) == nil && match(v) {
			select {
			case first <- v:
			default:
			}
		}
	})
	return first, sub, err
}

// lastFinalized returns the finalized payload of the stream's last message on the run's
// results subject when it is a results message or a finalized event; nil when the subject
// is empty or ends otherwise.
func (c *Client) lastFinalized(ctx context.Context, runID string) (*contracts.BatchFinalized, error) {
	stream, err := c.resultsStream(ctx, runID)
	if err != nil {
		return nil, err
	}
	subject, err := c.resultsSubject(ctx, runID)
	if err != nil {
		return nil, err
	}
	m, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: results of %s: %w", runID, err)
	}
	ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil {
		return nil, nil
	}
	switch ev.Type {
	case contracts.TypeBatchResults:
		var b contracts.BatchResults
		if err := json.Unmarshal(ev.Data, &b); err != nil {
			return nil, nil
		}
		return &b.Finalized, nil
	case contracts.TypeBatchFinalized:
		var f contracts.BatchFinalized
		if err := json.Unmarshal(ev.Data, &f); err != nil {
			return nil, nil
		}
		return &f, nil
	}
	return nil, nil
}

// batchWatch collects one batch's committed results from a plain subscription.
type batchWatch struct {
	batchID string
	drop    func(contracts.ToolResultEvent) bool // tests: results the subscription loses
	// finalized is closed when the batch's finalized event arrives.
	finalized chan struct{}

	mu      sync.Mutex
	results map[int]contracts.ToolResultEvent
	final   *contracts.BatchFinalized
	seq     uint64
}

func newBatchWatch(batchID string, drop func(contracts.ToolResultEvent) bool) *batchWatch {
	return &batchWatch{batchID: batchID, drop: drop, finalized: make(chan struct{}), results: map[int]contracts.ToolResultEvent{}}
}

func (w *batchWatch) deliver(m *nats.Msg) {
	ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case contracts.TypeToolResult:
		var r contracts.ToolResultEvent
		if json.Unmarshal(ev.Data, &r) == nil && r.BatchID == w.batchID && (w.drop == nil || !w.drop(r)) {
			w.results[r.Index] = r
		}
	case contracts.TypeBatchFinalized:
		var f contracts.BatchFinalized
		if json.Unmarshal(ev.Data, &f) == nil && f.BatchID == w.batchID && w.final == nil {
			w.finish(m, &f)
		}
	case contracts.TypeBatchResults:
		var b contracts.BatchResults
		if json.Unmarshal(ev.Data, &b) == nil && b.BatchID == w.batchID && w.final == nil {
			for _, r := range b.Results {
				if w.drop == nil || !w.drop(r) {
					w.results[r.Index] = r
				}
			}
			w.finish(m, &b.Finalized)
		}
	}
}

// finish records the batch's finalized payload f, carried by the republished message m,
// and wakes the waiter. w.mu is held.
func (w *batchWatch) finish(m *nats.Msg, f *contracts.BatchFinalized) {
	w.final = f
	// The stream republishes with the stored message's sequence.
	w.seq, _ = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	close(w.finalized)
}

// whole returns the batch when a result of every call the finalized event names has
// arrived, in model order.
func (w *batchWatch) whole() (*BatchResult, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final == nil || len(w.results) != len(w.final.CallIDs) {
		return nil, false
	}
	res := &BatchResult{BatchID: w.batchID, Finalized: *w.final, Sequence: w.seq, Results: make([]contracts.ToolResultEvent, 0, len(w.results))}
	for i, id := range w.final.CallIDs {
		r, ok := w.results[i]
		if !ok || r.CallID != id {
			return nil, false
		}
		res.Results = append(res.Results, r)
	}
	return res, true
}
