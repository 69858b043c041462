package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// Tickets: reading the open tickets and deciding them, the operations every door shares
// (the micro endpoints and the HTTP api call them; the JetStream subject is the third
// door, used directly by platforms), and those doors' handlers. None of them changes a
// record: a decision is a resume command published on its subject, validated and
// applied by the gate, whose answer (ticket.resolved or ticket.rejected, matched by the
// command's id) is what the caller gets back.

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
	if !validCorrelation(correlationID) {
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
	if !validCorrelation(correlationID) {
		return contracts.TicketResolution{}, notWaiting(correlationID)
	}
	t, _, err := s.env.Tickets.Get(ctx, correlationID)
	switch {
	case err == nil:
		return send(contracts.ResumeCommandFromTicket(t, result), true)
	case !errors.Is(err, state.ErrNotFound):
		return contracts.TicketResolution{}, internalErr(err)
	}
	pc, ok, err := s.reader.LookupParked(ctx, correlationID)
	if err != nil {
		return contracts.TicketResolution{}, internalErr(err)
	}
	if !ok {
		return contracts.TicketResolution{}, notWaiting(correlationID)
	}
	cmd := contracts.ResumeCommand{CorrelationID: correlationID, RunID: pc.RunID, ThreadID: pc.ThreadID,
		SnapshotID: pc.SnapshotID, Result: result}
	return send(cmd, pc.EverParked)
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
		pc, ok, err := s.reader.LookupParked(ctx, cmd.CorrelationID)
		if err != nil {
			return contracts.TicketResolution{}, internalErr(err)
		}
		known = ok && pc.EverParked
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

func (s *Service) httpTickets(w http.ResponseWriter, r *http.Request) {
	ts, err := s.Tickets(r.Context())
	s.reply(w, r, httpapi.TicketList{Tickets: ts}, err)
}

func (s *Service) httpTicket(w http.ResponseWriter, r *http.Request) {
	t, err := s.Ticket(r.Context(), r.PathValue("correlation_id"))
	s.reply(w, r, t, err)
}

func (s *Service) httpApprove(w http.ResponseWriter, r *http.Request) {
	var req httpapi.ApproveRequest
	if err := readBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.decide(w, r, Decision{Allow: true, Text: req.Note, Arguments: req.Arguments, ArgumentsDigest: req.ArgumentsDigest})
}

func (s *Service) httpDeny(w http.ResponseWriter, r *http.Request) {
	var req httpapi.DenyRequest
	if err := readBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.decide(w, r, Decision{Text: req.Reason})
}

func (s *Service) decide(w http.ResponseWriter, r *http.Request, d Decision) {
	corr := r.PathValue("correlation_id")
	d.Actor = actorOf(r.Context())
	res, err := s.Decide(r.Context(), corr, d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info().Str("correlation_id", corr).Str("code", res.Code).Str("actor", d.Actor).Str("remote", r.RemoteAddr).Msg("ticket resolved over http")
	status := http.StatusOK
	if res.Code == contracts.ResolvedApprovalRecorded {
		// Counted, not decided: the ticket needs more approvals and stays open.
		status = http.StatusAccepted
	}
	writeJSON(w, status, res)
}

func (s *Service) microTicketsList(ctx context.Context, _ micro.Request) (any, error) {
	ts, err := s.Tickets(ctx)
	if err != nil {
		return nil, err
	}
	return httpapi.TicketList{Tickets: ts}, nil
}

func (s *Service) microTicketsGet(ctx context.Context, req micro.Request) (any, error) {
	corr, err := bareOrField(req.Data(), "correlation_id")
	if err != nil {
		return nil, err
	}
	return s.Ticket(ctx, corr)
}

func (s *Service) microTicketsResolve(ctx context.Context, req micro.Request) (any, error) {
	data := req.Data()
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "request body must be a JSON object: %v", err)
	}
	actor := s.microUserActor(req.Subject())
	if _, full := probe["result"]; full {
		return s.Resolve(ctx, data, actor)
	}
	var d httpapi.ShortDecision
	if err := strictJSON(data, &d); err != nil {
		return nil, err
	}
	switch d.Decision {
	case contracts.DecisionAllow, contracts.PermissionDecisionKind(httpapi.DecisionWordApprove):
		if d.Reason != "" {
			return nil, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "an allow decision carries a note, not a reason")
		}
		return s.Decide(ctx, d.CorrelationID, Decision{Allow: true, Text: d.Note, Arguments: d.Arguments, ArgumentsDigest: d.ArgumentsDigest, Actor: actor})
	case contracts.DecisionDeny:
		if d.Note != "" {
			return nil, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "a deny decision carries a reason, not a note")
		}
		return s.Decide(ctx, d.CorrelationID, Decision{Text: d.Reason, Arguments: d.Arguments, Actor: actor})
	}
	return nil, apiErr(http.StatusBadRequest, string(contracts.ResumeInvalid), "decision %q is not one of %s (or %s) and %s",
		d.Decision, httpapi.DecisionWordAllow, httpapi.DecisionWordApprove, httpapi.DecisionWordDeny)
}

// validCorrelation reports whether corr has the shape of a correlation id the gate issues
// ([contracts.CorrelationID]); no ticket can ever exist under any other.
func validCorrelation(corr string) bool {
	_, _, _, _, err := contracts.ParseCorrelationID(corr)
	return err == nil
}
