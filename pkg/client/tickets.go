package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Tickets: the open tickets of the tickets bucket, and the resume commands that answer
// them.

// ResumeRejectedError reports that a resume command was refused; Code is a
// [contracts.ResumeErrorCode] such as not_waiting or expired.
type ResumeRejectedError struct {
	contracts.TicketResolution
}

func (e *ResumeRejectedError) Error() string {
	return fmt.Sprintf("resume of %s rejected: %s: %s", e.CorrelationID, e.Code, e.Message)
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
	out, err := drainTickets(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("client: tickets: %w", err)
	}
	return out, nil
}

// drainTickets reads the tickets a watcher delivers up to its end-of-values marker (the
// latest value of each key), stops it, and returns them oldest first.
func drainTickets(ctx context.Context, w jetstream.KeyWatcher) ([]contracts.ResumeTicket, error) {
	defer func() { _ = w.Stop() }()
	out := []contracts.ResumeTicket{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watcher closed before the end of the list")
			}
			if e == nil { // every current ticket has been delivered
				sort.SliceStable(out, func(i, j int) bool { return out[i].OpenedAt.Before(out[j].OpenedAt) })
				return out, nil
			}
			var t contracts.ResumeTicket
			if err := contracts.DecodeRecord(e.Value(), &t); err != nil {
				return nil, fmt.Errorf("ticket %s: %w", e.Key(), err)
			}
			out = append(out, t)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// BatchTickets lists the open tickets of batch (runID, step), oldest first: the calls of
// the batch parked on an approval, a schedule or a client's execution — what a pending
// batch waits on. Like [Client.Tickets] it costs one round of messages.
func (c *Client) BatchTickets(ctx context.Context, runID string, step int64) ([]contracts.ResumeTicket, error) {
	kv, err := c.js.KeyValue(ctx, c.names.TicketsBucket())
	if err != nil {
		return nil, fmt.Errorf("client: tickets of %s: %w", contracts.BatchID(runID, step), err)
	}
	// Ticket keys are {kind}.{run}.{step}.{call} ([contracts.CorrelationID]).
	w, err := kv.Watch(ctx, "*."+runID+"."+strconv.FormatInt(step, 10)+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("client: tickets of %s: %w", contracts.BatchID(runID, step), err)
	}
	out, err := drainTickets(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("client: tickets of %s: %w", contracts.BatchID(runID, step), err)
	}
	return out, nil
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
	if err := contracts.DecodeRecord(e.Value(), &t); err != nil {
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
			if err := contracts.DecodeRecord(e.Value(), &t); err != nil {
				return contracts.ResumeTicket{}, fmt.Errorf("client: ticket %s: %w", e.Key(), err)
			}
			return t, nil
		case <-ctx.Done():
			return contracts.ResumeTicket{}, fmt.Errorf("client: waiting for the ticket of %s: %w", callID, ctx.Err())
		}
	}
}
