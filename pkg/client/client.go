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

// Client talks to an awaken deployment over one NATS connection. It is safe for
// concurrent use.
type Client struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	names  contracts.Names
	source string

	// deployment is names with the deployment's recorded partition count, read once.
	deployment handle[contracts.Names]
	results    sync.Map // results stream name → *handle[jetstream.Stream]
	objects    handle[jetstream.ObjectStore]
	// keepLinks: return resource_link blocks as published (see [KeepLinks]).
	keepLinks bool
	// resumeSubject is where Resume publishes (see [AuthenticatedResumes]).
	resumeSubject func(contracts.Names) string

	// dropResult, set by tests only, makes SubmitAndWait's subscription lose the results
	// it matches, as a plain subscription can.
	dropResult func(contracts.ToolResultEvent) bool
	// hedgeAfter, when set by tests, replaces streamHedgeAfter.
	hedgeAfter time.Duration
	// identicalCheckAfter, when set by tests, replaces identicalContentCheckAfter.
	identicalCheckAfter time.Duration
}

// handle is a JetStream handle (a stream's, a bucket's) looked up on first use and kept
// for the client's life; a lookup that fails is tried again on the next use.
type handle[H any] struct {
	mu    sync.Mutex
	h     H
	found bool
}

// get returns the handle, looked up with lookup the first time; what names it in the
// lookup's error.
func (h *handle[H]) get(what string, lookup func() (H, error)) (H, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.found {
		return h.h, nil
	}
	found, err := lookup()
	if err != nil {
		var none H
		return none, fmt.Errorf("client: %s: %w", what, err)
	}
	h.h, h.found = found, true
	return found, nil
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

// Prefix returns the subject prefix of the deployment the client talks to.
func (c *Client) Prefix() string { return c.names.Prefix }

// Names returns the deployment's names: the client's prefix and the partition count
// `awaken setup` recorded, read once from the submissions stream's metadata as every read
// of the client does (a deployment without it has one partition). Its per-run methods
// (Of, ResultsSubject, AuditSubject …) name the run's partition, and EachPartition every
// partition's stores. It fails only when the submissions stream cannot be read; a later
// call tries again.
func (c *Client) Names(ctx context.Context) (contracts.Names, error) {
	return c.deployment.get("partition count", func() (contracts.Names, error) {
		n := c.names
		st, err := c.js.Stream(ctx, n.SubmissionsStream())
		if err != nil {
			return n, err
		}
		p, err := contracts.PartitionsOf(st.CachedInfo().Config.Metadata)
		if err != nil {
			return n, err
		}
		n.Partitions = p
		return n, nil
	})
}

// runNames returns the names of run runID's partition ([Client.Names]).
func (c *Client) runNames(ctx context.Context, runID string) (contracts.Names, error) {
	n, err := c.Names(ctx)
	if err != nil {
		return n, err
	}
	return n.Of(runID), nil
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
