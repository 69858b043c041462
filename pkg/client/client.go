// Package client is the Go client for agent platforms: submit a batch, await its ordered
// results, answer approval tickets, cancel a run and watch the agent-event projection. It
// speaks only the public protocol (docs/protocol.md; the tour: docs/integration.md), so
// anything it does an outside client in another language can do the same way.
//
// Results come from the results stream: only the stream guarantees that a batch is seen
// whole (its results and finalized payload are one message, or for a batch too large for
// one, one atomic publish) and that a client which
// was offline when they were published still sees them. SubmitAndWait takes a shortcut
// that keeps that guarantee: it watches the run's results subject while the batch runs
// and, once it has seen the whole batch, confirms in the stream that the publish was
// committed; on any doubt it reads the stream (see wait.go).
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrRejected is wrapped by [*RejectedError].
var ErrRejected = errors.New("batch rejected")

// RejectedError reports that the pipeline refused a submitted batch.
type RejectedError struct {
	contracts.BatchRejected
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("batch %s rejected: %s: %s", e.BatchID, e.Code, e.Message)
}

// Unwrap lets callers test for [ErrRejected].
func (e *RejectedError) Unwrap() error { return ErrRejected }

// ResumeRejectedError reports that a resume command was refused; Code is a
// [contracts.ResumeErrorCode] such as not_waiting or expired.
type ResumeRejectedError struct {
	contracts.TicketResolution
}

func (e *ResumeRejectedError) Error() string {
	return fmt.Sprintf("resume of %s rejected: %s: %s", e.CorrelationID, e.Code, e.Message)
}

// Client talks to an awaken deployment over one NATS connection. It is safe for
// concurrent use.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	names  contracts.Names
	source string

	mu      sync.Mutex
	results jetstream.Stream      // the results stream's handle, once looked up
	objects jetstream.ObjectStore // the objects bucket's handle, once looked up
	// keepLinks: return resource_link blocks as published (see [KeepLinks]).
	keepLinks bool
	// resumeSubject is where Resume publishes (see [AuthenticatedResumes]).
	resumeSubject func(contracts.Names) string

	// dropResult, set by tests only, makes SubmitAndWait's subscription lose the results
	// it matches, as a plain subscription can.
	dropResult func(contracts.ToolResultEvent) bool
	// hedgeAfter, when set by tests, replaces streamHedgeAfter.
	hedgeAfter time.Duration
}

// Option configures a [Client].
type Option func(*Client)

// WithPrefix sets the subject prefix of the deployment (default "awaken").
func WithPrefix(prefix string) Option {
	return func(c *Client) { c.names = contracts.NewNames(prefix) }
}

// WithSource sets the CloudEvents source of what the client publishes.
func WithSource(source string) Option { return func(c *Client) { c.source = source } }

// AuthenticatedResumes makes [Client.Resume] publish on the api's resume subject
// ([contracts.Names.TicketResumeAPISubject]) instead of the public one: the gate records
// the actor of a command there as authenticated. It is for a door that authenticated the
// actor itself (the api); deploy/nats/auth.conf lets only the api user publish there, so
// any other user's publish is a permission violation and the command is never stored.
// Without it every command's actor is recorded as claimed (actor_claimed).
func AuthenticatedResumes() Option {
	return func(c *Client) { c.resumeSubject = contracts.Names.TicketResumeAPISubject }
}

// New returns a client on an existing connection; the caller owns the connection.
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c := &Client{nc: nc, js: js, names: contracts.NewNames(""), source: "awaken/client",
		resumeSubject: contracts.Names.TicketResumeSubject}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Dial connects to url and returns a client that owns the connection; Close it when done.
func Dial(url string, opts ...Option) (*Client, error) {
	nc, err := nats.Connect(url, nats.Name("awaken-client"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("client: connect %s: %w", url, err)
	}
	c, err := New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Close drains and closes the connection.
func (c *Client) Close() error { return c.nc.Drain() }

// Conn returns the underlying connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// Names returns the subject names the client uses.
func (c *Client) Names() contracts.Names { return c.names }

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

// Submit publishes a batch and waits for the stream's acknowledgement.
//
// The event id is "{batch_id}:{content hash}": resubmitting identical content is
// deduplicated by the stream, while different content under the same batch id still
// reaches the batcher and is rejected with code conflict. (With the bare batch id as event
// id, as a simple client may, the stream would silently drop a
// conflicting resubmission inside its duplicate window.)
func (c *Client) Submit(ctx context.Context, sub contracts.BatchSubmission) (string, error) {
	return c.SubmitAs(ctx, sub, SubmissionEventID(sub))
}

// SubmitAs is [Client.Submit] under the event id eventID instead of the content-derived
// one. A caller that must be heard again with the same content inside the stream's
// duplicate window (a retry after run_busy) gives each attempt its own id, for example
// with [AttemptEventID]; the batcher's record makes an identical resubmission of an
// accepted batch a no-op whatever its event id.
func (c *Client) SubmitAs(ctx context.Context, sub contracts.BatchSubmission, eventID string) (string, error) {
	return sub.BatchID(), c.publish(ctx, c.names.SubmitSubject(), eventID, contracts.TypeBatchRequested, sub)
}

// AttemptEventID is an event id of its own for one attempt at submitting sub:
// [SubmissionEventID] followed by ":" and 16 random hex digits. Two attempts never share
// it, so the stream never drops one as a duplicate and each gets the batcher's own answer.
func AttemptEventID(sub contracts.BatchSubmission) string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails
	return SubmissionEventID(sub) + ":" + hex.EncodeToString(nonce[:])
}

// SubmissionEventID is the CloudEvents id [Client.Submit] and [Client.SubmitAndWait] give a
// submission: its batch id and the start of its content hash, so a re-submission of the
// same content is deduplicated and a different content under the same batch id is a
// different event. The batcher's rejection carries it as event_id, which is how a
// rejection is matched to the submission it refuses.
func SubmissionEventID(sub contracts.BatchSubmission) string {
	return sub.BatchID() + ":" + sub.Hash()[:16]
}

// waitSettled waits until the batcher's durable consumer has settled (acknowledged or
// rejected) every submission up to stream sequence seq.
func (c *Client) waitSettled(ctx context.Context, seq uint64) error {
	cons, err := c.js.Consumer(ctx, c.names.SubmissionsStream(), contracts.ConsumerBatcherSubmit)
	if err != nil {
		return fmt.Errorf("client: batcher consumer: %w", err)
	}
	delay := 2 * time.Millisecond
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("client: batcher consumer: %w", err)
		}
		if info.AckFloor.Stream >= seq {
			return nil
		}
		select {
		case <-time.After(delay):
			delay = min(2*delay, 100*time.Millisecond)
		case <-ctx.Done():
			return fmt.Errorf("client: waiting for the batcher to settle the submission: %w", ctx.Err())
		}
	}
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
	stream, err := c.resultsStream(ctx)
	if err != nil {
		return nil, err
	}
	last, err := stream.GetLastMsgForSubject(ctx, c.names.ResultsSubject(runID))
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
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{c.names.ResultsSubject(runID)},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: orderedConsumerIdle,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	if until > 0 && until <= after {
		return errReadEnd
	}
	cons, err := c.js.OrderedConsumer(ctx, c.names.ResultsStream(), cfg)
	if err != nil {
		return fmt.Errorf("results consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(resultsHeartbeat))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	defer func() {
		it.Stop()
		c.deleteOrdered(cons)
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

// deleteOrdered deletes the server-side consumer of an ordered consumer that is done, in
// the background: stopping the iterator leaves it on the server until its inactivity
// threshold, and every waiting client would otherwise hold one.
func (c *Client) deleteOrdered(cons jetstream.Consumer) {
	c.deleteOrderedOn(c.names.ResultsStream(), cons)
}

// deleteOrderedOn is [Client.deleteOrdered] for an ordered consumer of stream.
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

// Resume publishes a resume command and waits for its answer. A refusal is returned as a
// [*ResumeRejectedError] carrying the code. The command goes on the public resume subject
// (unless [AuthenticatedResumes]): the gate records cmd.Actor as claimed
// (TicketResolution.ActorClaimed) and refuses a reserved one ([contracts.ReservedActor])
// with reserved_actor, leaving the ticket open.
func (c *Client) Resume(ctx context.Context, cmd contracts.ResumeCommand) (contracts.TicketResolution, error) {
	id := "resume-" + nats.NewInbox()[len(nats.InboxPrefix):]
	answers := make(chan struct {
		res      contracts.TicketResolution
		rejected bool
	}, 1)
	handler := func(m *nats.Msg) {
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil {
			return
		}
		var r contracts.TicketResolution
		if json.Unmarshal(ev.Data, &r) != nil || r.ResumeID != id {
			return
		}
		select {
		case answers <- struct {
			res      contracts.TicketResolution
			rejected bool
		}{r, ev.Type == contracts.TypeTicketRejected}:
		default:
		}
	}
	s1, err := c.nc.Subscribe(c.names.TicketResolvedSubject(), handler)
	if err != nil {
		return contracts.TicketResolution{}, fmt.Errorf("client: %w", err)
	}
	defer s1.Unsubscribe()
	s2, err := c.nc.Subscribe(c.names.TicketRejectedSubject(), handler)
	if err != nil {
		return contracts.TicketResolution{}, fmt.Errorf("client: %w", err)
	}
	defer s2.Unsubscribe()
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return contracts.TicketResolution{}, fmt.Errorf("client: %w", err)
	}
	if err := c.publish(ctx, c.resumeSubject(c.names), id, contracts.TypeTicketResume, cmd); err != nil {
		return contracts.TicketResolution{}, err
	}
	select {
	case a := <-answers:
		if a.rejected {
			return a.res, &ResumeRejectedError{a.res}
		}
		return a.res, nil
	case <-ctx.Done():
		return contracts.TicketResolution{}, fmt.Errorf("client: awaiting resume answer: %w", ctx.Err())
	}
}

// Approve answers a permission or scheduled-action ticket with allow.
func (c *Client) Approve(ctx context.Context, t contracts.ResumeTicket, note string) (contracts.TicketResolution, error) {
	return c.Decide(ctx, t, contracts.PermissionDecision{Decision: contracts.DecisionAllow, Note: note}, "")
}

// Deny answers a permission ticket with deny; the call completes as "blocked: {reason}".
func (c *Client) Deny(ctx context.Context, t contracts.ResumeTicket, reason string) (contracts.TicketResolution, error) {
	return c.Decide(ctx, t, contracts.PermissionDecision{Decision: contracts.DecisionDeny, Reason: reason}, "")
}

// Decide answers a permission or scheduled-action ticket with d — an allow may carry
// edited arguments — recording actor as who decided ("" for none), as a claim (see
// [Client.Resume]). An edit that does not
// fit the tool is refused invalid_arguments and leaves the ticket open. An allow names
// d.ArgumentsDigest, or t's when d names none ([contracts.ResumeCommandFromTicket]), so
// it approves exactly the arguments of the ticket read; the gate refuses another with
// digest_mismatch. A ticket that needs several approvers cannot be approved through this
// door, whose actor is a claim (approver_not_authenticated): approve it through the api.
func (c *Client) Decide(ctx context.Context, t contracts.ResumeTicket, d contracts.PermissionDecision, actor string) (contracts.TicketResolution, error) {
	cmd := contracts.ResumeCommandFromTicket(t, contracts.ResumeResult{Permission: &d})
	cmd.Actor = actor
	return c.Resume(ctx, cmd)
}

// CompleteClientCall answers a client_execution ticket with the client's tool output.
func (c *Client) CompleteClientCall(ctx context.Context, t contracts.ResumeTicket, out contracts.ToolOutput) (contracts.TicketResolution, error) {
	return c.Resume(ctx, contracts.ResumeCommandFromTicket(t, contracts.ResumeResult{ToolResult: &out}))
}

// ErrNoTicket is wrapped by [Client.Ticket] when no ticket is open under the correlation
// id (never opened, already resolved, expired or cleared by cancellation).
var ErrNoTicket = errors.New("no open ticket")

// Tickets lists the open tickets, oldest first. It reads every ticket with one watcher
// (the latest value of each key, then the end-of-values marker), so the cost is one round
// of messages, not one request per ticket.
func (c *Client) Tickets(ctx context.Context) ([]contracts.ResumeTicket, error) {
	kv, err := c.js.KeyValue(ctx, c.names.TicketsBucket())
	if err != nil {
		return nil, fmt.Errorf("client: tickets: %w", err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("client: tickets: %w", err)
	}
	defer func() { _ = w.Stop() }()
	out := []contracts.ResumeTicket{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("client: tickets: watcher closed before the end of the list")
			}
			if e == nil { // every current ticket has been delivered
				sort.SliceStable(out, func(i, j int) bool { return out[i].OpenedAt.Before(out[j].OpenedAt) })
				return out, nil
			}
			var t contracts.ResumeTicket
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				return nil, fmt.Errorf("client: ticket %s: %w", e.Key(), err)
			}
			out = append(out, t)
		case <-ctx.Done():
			return nil, fmt.Errorf("client: tickets: %w", ctx.Err())
		}
	}
}

// Ticket returns the open ticket with correlationID; when there is none the error wraps
// [ErrNoTicket].
func (c *Client) Ticket(ctx context.Context, correlationID string) (contracts.ResumeTicket, error) {
	kv, err := c.js.KeyValue(ctx, c.names.TicketsBucket())
	if err != nil {
		return contracts.ResumeTicket{}, fmt.Errorf("client: tickets: %w", err)
	}
	e, err := kv.Get(ctx, correlationID)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
			return contracts.ResumeTicket{}, fmt.Errorf("client: ticket %s: %w", correlationID, ErrNoTicket)
		}
		return contracts.ResumeTicket{}, fmt.Errorf("client: ticket %s: %w", correlationID, err)
	}
	var t contracts.ResumeTicket
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return contracts.ResumeTicket{}, fmt.Errorf("client: ticket %s: %w", correlationID, err)
	}
	return t, nil
}

// WaitTicket waits until a ticket for call callID of batch (runID, step) is open.
func (c *Client) WaitTicket(ctx context.Context, runID string, step int64, callID string) (contracts.ResumeTicket, error) {
	kv, err := c.js.KeyValue(ctx, c.names.TicketsBucket())
	if err != nil {
		return contracts.ResumeTicket{}, fmt.Errorf("client: tickets: %w", err)
	}
	w, err := kv.Watch(ctx, contracts.CorrelationIDsOfCall(runID, step, callID))
	if err != nil {
		return contracts.ResumeTicket{}, fmt.Errorf("client: watch tickets: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var t contracts.ResumeTicket
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				return contracts.ResumeTicket{}, fmt.Errorf("client: ticket %s: %w", e.Key(), err)
			}
			return t, nil
		case <-ctx.Done():
			return contracts.ResumeTicket{}, fmt.Errorf("client: waiting for the ticket of %s: %w", callID, ctx.Err())
		}
	}
}

// Cancel asks the pipeline to seal the open batches of runID: every unfinished call
// becomes Indeterminate("cancelled") and the results publish once.
func (c *Client) Cancel(ctx context.Context, runID, reason string) error {
	id := "cancel-" + runID + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return c.publish(ctx, c.names.RunCancelSubject(), id, contracts.TypeRunCancel, contracts.RunCancel{RunID: runID, Reason: reason})
}

func (c *Client) publish(ctx context.Context, subject, id, typ string, payload any) error {
	ev, err := cloudevent.NewEvent(id, c.source, typ, payload)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if _, err := c.js.PublishMsg(ctx, cloudevent.EncodeMsg(subject, ev)); err != nil {
		return fmt.Errorf("client: publish %s: %w", subject, err)
	}
	return nil
}
