package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// This file holds the operations every door shares (the micro endpoints and the HTTP api
// call them; the JetStream subject is the third door, used directly by platforms). None of
// them changes a record: a decision is a resume command published on the tickets stream,
// validated and applied by the gate, whose answer (ticket.resolved or ticket.rejected,
// matched by the command's id) is what the caller gets back.

// MaxTextLength bounds an approval note or a denial reason. The reason ends up in the
// call's output ("blocked: {reason}"), which the model reads.
const MaxTextLength = 4096

// Tickets returns the open tickets, oldest first.
func (s *Service) Tickets(ctx context.Context) ([]contracts.ResumeTicket, error) {
	ts, err := s.reader.Tickets(ctx)
	if err != nil {
		return nil, internalErr(err)
	}
	return ts, nil
}

// Ticket returns the open ticket correlationID, or an *httpapi.Error with code not_waiting and
// status 404 when no ticket is open under it.
func (s *Service) Ticket(ctx context.Context, correlationID string) (contracts.ResumeTicket, error) {
	if _, ok := parseCorrelation(correlationID); !ok {
		return contracts.ResumeTicket{}, notWaiting(correlationID)
	}
	t, _, err := s.env.Tickets.Get(ctx, correlationID)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return contracts.ResumeTicket{}, notWaiting(correlationID)
		}
		return contracts.ResumeTicket{}, internalErr(err)
	}
	return t, nil
}

func notWaiting(corr string) *httpapi.Error {
	return &httpapi.Error{Code: string(contracts.ResumeNotWaiting), Status: http.StatusNotFound,
		Message: fmt.Sprintf("no ticket is open for correlation %q", corr)}
}

// Decision is a human's answer to a ticket through the api.
type Decision struct {
	// Allow approves; otherwise the ticket is denied.
	Allow bool
	// Text is the approval's note or the denial's reason.
	Text string
	// Arguments, on an approval, edit the call's arguments (nil: as proposed).
	Arguments json.RawMessage
	// ArgumentsDigest, on an approval, names the ticket arguments it approves ("": those
	// of the ticket Decide reads).
	ArgumentsDigest string
	// Actor is who decided, from the caller's authentication.
	Actor string
}

// Decide answers the ticket correlationID with d: allow (Text is the note, Arguments an
// optional edit) or deny (Text is the reason; the gate defaults an empty one to
// "denied"). The command's identity (run, thread, snapshot) is copied from the committed
// ticket; when the ticket is already gone it is taken from the batch record, so that the
// gate — not the api — says why the ticket is not waiting (resolved, cleared by
// cancellation, or expired). It returns the gate's resolution, or an *httpapi.Error carrying the
// gate's refusal code (invalid_arguments, 422, for an edit that does not fit the tool:
// the ticket stays open).
//
// Decide is safe to call concurrently for one ticket: the gate commits exactly one
// resolution and refuses the others with not_waiting.
func (s *Service) Decide(ctx context.Context, correlationID string, d Decision) (contracts.TicketResolution, error) {
	if len(d.Text) > MaxTextLength {
		return contracts.TicketResolution{}, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "note or reason is longer than %d bytes", MaxTextLength)
	}
	p := &contracts.PermissionDecision{Decision: contracts.DecisionDeny, Reason: d.Text}
	edit := &contracts.PermissionDecision{Arguments: d.Arguments}
	switch {
	case d.Allow && edit.HasArguments():
		p = &contracts.PermissionDecision{Decision: contracts.DecisionAllow, Note: d.Text, Arguments: d.Arguments, ArgumentsDigest: d.ArgumentsDigest}
	case d.Allow:
		p = &contracts.PermissionDecision{Decision: contracts.DecisionAllow, Note: d.Text, ArgumentsDigest: d.ArgumentsDigest}
	case edit.HasArguments():
		return contracts.TicketResolution{}, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "a deny decision carries no arguments")
	}
	result := contracts.ResumeResult{Permission: p}
	send := func(cmd contracts.ResumeCommand, known bool) (contracts.TicketResolution, error) {
		cmd.Actor = d.Actor
		return s.send(ctx, cmd, known)
	}
	if _, ok := parseCorrelation(correlationID); !ok {
		return contracts.TicketResolution{}, notWaiting(correlationID)
	}
	t, _, err := s.env.Tickets.Get(ctx, correlationID)
	switch {
	case err == nil:
		return send(contracts.ResumeCommandFromTicket(t, result), true)
	case !errors.Is(err, state.ErrNotFound):
		return contracts.TicketResolution{}, internalErr(err)
	}
	pc, ok, err := s.reader.lookupParked(ctx, correlationID)
	if err != nil {
		return contracts.TicketResolution{}, internalErr(err)
	}
	if !ok {
		return contracts.TicketResolution{}, notWaiting(correlationID)
	}
	cmd := contracts.ResumeCommand{CorrelationID: correlationID, RunID: pc.runID, ThreadID: pc.threadID,
		SnapshotID: pc.snapshotID, Result: result}
	return send(cmd, pc.everParked)
}

// Resolve publishes a complete resume command (any result kind, client tool results
// included) after the same structural checks the gate's decoder applies, and returns the
// gate's answer. data is the command's JSON; actor is who the caller authenticated as,
// recorded whatever actor the command names (which, if it differs, is kept after it:
// "{actor} as {claimed}").
func (s *Service) Resolve(ctx context.Context, data []byte, actor string) (contracts.TicketResolution, error) {
	cmd, err := contracts.DecodeResumeCommand(data)
	if err != nil {
		return contracts.TicketResolution{}, asError(err)
	}
	cmd.Actor = combineActor(actor, cmd.Actor)
	known := false
	if _, _, err := s.env.Tickets.Get(ctx, cmd.CorrelationID); err == nil {
		known = true
	} else if !errors.Is(err, state.ErrNotFound) {
		return contracts.TicketResolution{}, internalErr(err)
	} else {
		pc, ok, err := s.reader.lookupParked(ctx, cmd.CorrelationID)
		if err != nil {
			return contracts.TicketResolution{}, internalErr(err)
		}
		known = ok && pc.everParked
	}
	return s.send(ctx, *cmd, known)
}

// send publishes cmd and waits up to the resolve timeout for the gate's answer.
// ticketKnown selects 409 rather than 404 for a not_waiting refusal.
func (s *Service) send(ctx context.Context, cmd contracts.ResumeCommand, ticketKnown bool) (contracts.TicketResolution, error) {
	wctx, cancel := context.WithTimeout(ctx, s.opts.ResolveTimeout)
	defer cancel()
	res, err := s.client.Resume(wctx, cmd)
	if err == nil {
		return res, nil
	}
	var rr *client.ResumeRejectedError
	switch {
	case errors.As(err, &rr):
		// The gate's message may repeat the code ("not_waiting: …"); the code has its own field.
		msg := strings.TrimPrefix(rr.Message, rr.Code+": ")
		return res, &httpapi.Error{Code: rr.Code, Message: msg, Status: StatusForResumeCode(rr.Code, ticketKnown), Err: err}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return res, &httpapi.Error{Code: httpapi.CodeTimeout, Status: http.StatusGatewayTimeout, Err: err,
			Message: fmt.Sprintf("the gate did not answer within %s; if the command was queued it will still be applied or refused — check the ticket", s.opts.ResolveTimeout)}
	case ctx.Err() != nil:
		return res, &httpapi.Error{Code: httpapi.CodeUnavailable, Status: http.StatusServiceUnavailable, Err: err,
			Message: "the request ended before the gate answered; if the command was queued it will still be applied or refused"}
	}
	return res, internalErr(err)
}

// CancelRun cancels runID and answers once the run has durably ended: the gate recorded
// the end on the run record — every later submission of the run is refused — sealed its
// open batch (every unfinished call becomes Indeterminate "cancelled", tickets are cleared,
// its results publish once) and announced io.awaken.run.ended.v1 — or the run record shows
// the end, should the announcement be lost. The wait is bounded by ResolveTimeout; past it
// the answer is [httpapi.CodeCancelTimeout] (504). Cancelling a run twice, or a run with no open batch, is harmless
// and answers the same.
func (s *Service) CancelRun(ctx context.Context, runID, reason string) (httpapi.CancelResult, error) {
	if err := contracts.ValidateID("run_id", runID); err != nil {
		return httpapi.CancelResult{}, invalidIDErr(err)
	}
	if len(reason) > MaxTextLength {
		return httpapi.CancelResult{}, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "reason is longer than %d bytes", MaxTextLength)
	}
	if reason == "" {
		reason = "cancelled by operator"
	}
	wctx, cancel := context.WithTimeout(ctx, s.opts.ResolveTimeout)
	defer cancel()
	// The run record, which this api may read, hedges the announcement's subscription.
	ended, err := s.client.CancelRun(wctx, runID, reason, client.CheckEndedWith(func(ctx context.Context) (contracts.RunEndedEvent, bool, error) {
		rec, _, err := s.reader.runs.Get(ctx, contracts.RunKey(runID))
		if err != nil || rec.Ended == nil {
			return contracts.RunEndedEvent{}, false, err
		}
		return contracts.RunEndedEvent{RunID: runID, Reason: rec.Ended.Reason, Keys: rec.Ended.Keys, EndedAt: rec.EndedAt}, true, nil
	}))
	switch {
	case err == nil:
		return httpapi.CancelResult{RunID: runID, Status: httpapi.StatusEnded, Reason: ended.Reason, Keys: ended.Keys, EndedAt: ended.EndedAt}, nil
	case errors.Is(err, client.ErrCancelPending):
		return httpapi.CancelResult{}, unseenErr(ctx, err,
			"the request ended before the run was seen ended; the cancel is stored and will still be applied",
			httpapi.CodeCancelTimeout, fmt.Sprintf("the cancel of run %s is stored and will be applied, but the run was not seen ended within %s; sending it again is harmless", runID, s.opts.ResolveTimeout))
	}
	return httpapi.CancelResult{}, internalErr(err)
}
