package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// This file is the api's door to cancellation and resolution: run and call cancellations
// and call resolutions over HTTP and NATS micro, checked here and sent with pkg/client
// (control.go there), which waits for the gate's answer.

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
		rec, _, err := s.env.Runs.Get(ctx, contracts.RunKey(runID))
		if err != nil || rec.Ended == nil {
			return contracts.RunEndedEvent{}, false, err
		}
		return contracts.RunEndedEvent{RunID: runID, Reason: rec.Ended.Reason, Keys: rec.Ended.Keys, EndedAt: rec.EndedAt}, true, nil
	}))
	switch {
	case err == nil:
		return httpapi.CancelResult{RunID: runID, Status: httpapi.StatusEnded, Reason: reason, End: ended.Reason, Keys: ended.Keys, EndedAt: ended.EndedAt}, nil
	case errors.Is(err, client.ErrCancelPending):
		return httpapi.CancelResult{}, unseenErr(ctx, err,
			"the request ended before the run was seen ended; the cancel is stored and will still be applied",
			httpapi.CodeCancelTimeout, fmt.Sprintf("the cancel of run %s is stored and will be applied, but the run was not seen ended within %s; sending it again is harmless", runID, s.opts.ResolveTimeout))
	}
	return httpapi.CancelResult{}, internalErr(err)
}

// httpCancel is POST /v1/runs/{run_id}/cancel.
func (s *Service) httpCancel(w http.ResponseWriter, r *http.Request) {
	var req httpapi.CancelRequest
	if err := readTargeted(r, "run_id", &req, &req.RunID); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.CancelRun(r.Context(), req.RunID, req.Reason)
	if err == nil {
		s.log.Info().Str("run_id", req.RunID).Str("reason", res.Reason).Str("end", res.End).Str("remote", r.RemoteAddr).Msg("run cancelled over http")
	}
	s.reply(w, r, res, err)
}

// microRunsCancel serves the micro endpoint runs.cancel: {"run_id","reason"} or the bare run id.
func (s *Service) microRunsCancel(ctx context.Context, req micro.Request) (any, error) {
	var cr httpapi.CancelRequest
	if err := readObjectOrID(req.Data(), "run_id", &cr, &cr.RunID); err != nil {
		return nil, err
	}
	return s.CancelRun(ctx, cr.RunID, cr.Reason)
}

// CancelCall cancels the call op on behalf of actor and waits (bounded by ResolveTimeout)
// until it is terminal: the answer says whether it was cancelled before start, stopped in
// flight (indeterminate), or acknowledged by the tool. An unknown operation id is 404, a
// terminal call 409 call_terminal (nothing changes), a call not seen ending in time 504
// call_cancel_timeout (the cancel is stored and still applies).
func (s *Service) CancelCall(ctx context.Context, op, reason, actor string) (client.CallCancelResult, error) {
	if len(reason) > MaxTextLength {
		return client.CallCancelResult{}, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "reason is longer than %d bytes", MaxTextLength)
	}
	if err := s.knownCall(ctx, op); err != nil {
		return client.CallCancelResult{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.opts.ResolveTimeout)
	defer cancel()
	res, err := s.client.CancelCall(wctx, op, reason, actor)
	var terminal *client.CallTerminalError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &terminal):
		return client.CallCancelResult{}, &httpapi.Error{Code: httpapi.CodeCallTerminal, Status: http.StatusConflict, Err: err,
			Message: fmt.Sprintf("call %s is already terminal (%s); nothing changed", op, terminal.Result.Status)}
	case errors.Is(err, client.ErrCallCancelPending):
		return client.CallCancelResult{}, unseenErr(ctx, err,
			"the request ended before the call was seen ending; the cancel is stored and will still be applied",
			httpapi.CodeCallCancelTimeout, fmt.Sprintf("the cancel of call %s is stored and will be applied, but the call (%s) was not seen ending within %s: "+
				"a call not yet reached by its batch ends when the batch gets to it; sending it again is harmless", op, res.Phase, s.opts.ResolveTimeout))
	}
	return client.CallCancelResult{}, internalErr(err)
}

func (s *Service) httpCancelCall(w http.ResponseWriter, r *http.Request) {
	var req httpapi.CallCancelRequest
	if err := readTargeted(r, "operation_id", &req, &req.OperationID); err != nil {
		s.writeError(w, r, err)
		return
	}
	actor := actorOf(r.Context())
	res, err := s.CancelCall(r.Context(), req.OperationID, req.Reason, actor)
	if err == nil {
		s.log.Info().Str("operation_id", req.OperationID).Str("status", res.Status).Str("actor", actor).Str("remote", r.RemoteAddr).Msg("call cancelled over http")
	}
	s.reply(w, r, res, err)
}

func (s *Service) microCallsCancel(ctx context.Context, req micro.Request) (any, error) {
	var cr httpapi.CallCancelRequest
	if err := readObjectOrID(req.Data(), "operation_id", &cr, &cr.OperationID); err != nil {
		return nil, err
	}
	return s.CancelCall(ctx, cr.OperationID, cr.Reason, MicroActor)
}

// knownCall checks that op names a call of a recorded batch: 400 for an id that does not
// parse, 404 for an unknown batch or call. The cancel and the resolve check it before
// they publish, so a typo is an answer, not a command that waits for nothing.
func (s *Service) knownCall(ctx context.Context, op string) error {
	runID, step, callID, err := contracts.ParseOperationID(op)
	if err != nil {
		return invalidIDErr(err)
	}
	b, err := s.reader.BatchRecord(ctx, contracts.BatchID(runID, step))
	if err != nil {
		var ae *httpapi.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return apiErr(http.StatusNotFound, httpapi.CodeNotFound, "no call %s", op)
		}
		return internalErr(err)
	}
	for _, c := range b.Submission.Calls {
		if c.CallID == callID {
			return nil
		}
	}
	return apiErr(http.StatusNotFound, httpapi.CodeNotFound, "no call %s", op)
}

// ResolveCall resolves the indeterminate call op on behalf of actor with role, and waits
// (bounded by ResolveTimeout) until the resolution is recorded: "resolved" when the batch
// was not finalized yet (its results carry the resolved output), "corrected" when it was
// (its results keep the indeterminate result and a correction event carries the resolved
// one). An unknown call is 404; a call not Indeterminate 409 call_not_indeterminate; one
// resolved already 409 call_already_resolved; an invalid request 422 invalid_resolution;
// a resolution not seen recorded in time 504 call_resolve_timeout.
func (s *Service) ResolveCall(ctx context.Context, req httpapi.CallResolveRequest, actor string, role httpapi.Role) (client.CallResolveResult, error) {
	op := req.OperationID
	if _, _, _, err := contracts.ParseOperationID(op); err != nil {
		return client.CallResolveResult{}, invalidIDErr(err)
	}
	cmd := contracts.CallResolve{OperationID: op, Outcome: req.Outcome, Output: req.Output, Note: req.Note}
	if err := cmd.Validate(); err != nil {
		return client.CallResolveResult{}, &httpapi.Error{Code: httpapi.CodeInvalidResolution, Status: http.StatusUnprocessableEntity, Err: err, Message: err.Error()}
	}
	if err := s.knownCall(ctx, op); err != nil {
		return client.CallResolveResult{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.opts.ResolveTimeout)
	defer cancel()
	res, err := s.client.ResolveCall(wctx, op, client.CallResolveRequest{Outcome: req.Outcome, Output: req.Output, Note: req.Note}, actor, string(role))
	var notIndeterminate *client.CallNotIndeterminateError
	var resolved *client.CallAlreadyResolvedError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &notIndeterminate):
		return client.CallResolveResult{}, &httpapi.Error{Code: httpapi.CodeCallNotIndeterminate, Status: http.StatusConflict, Err: err,
			Message: fmt.Sprintf("call %s is %s; only an indeterminate call may be resolved, and nothing changed", op, notIndeterminate.Phase)}
	case errors.As(err, &resolved):
		return client.CallResolveResult{}, &httpapi.Error{Code: httpapi.CodeCallAlreadyResolved, Status: http.StatusConflict, Err: err,
			Message: fmt.Sprintf("call %s was resolved already (%s, by %q); nothing changed", op, resolved.Result.Status, resolved.Result.Actor)}
	case errors.Is(err, client.ErrCallResolvePending):
		return client.CallResolveResult{}, unseenErr(ctx, err,
			"the request ended before the resolution was seen recorded; it is stored and will still be applied",
			httpapi.CodeCallResolveTimeout, fmt.Sprintf("the resolution of call %s is stored and will be applied, but was not seen recorded within %s", op, s.opts.ResolveTimeout))
	}
	return client.CallResolveResult{}, internalErr(err)
}

func (s *Service) httpResolveCall(w http.ResponseWriter, r *http.Request) {
	var req httpapi.CallResolveRequest
	if err := readTargeted(r, "operation_id", &req, &req.OperationID); err != nil {
		s.writeError(w, r, err)
		return
	}
	actor := actorOf(r.Context())
	res, err := s.ResolveCall(r.Context(), req, actor, httpapi.RoleOperator)
	if err == nil {
		s.log.Info().Str("operation_id", req.OperationID).Str("status", res.Status).Str("outcome", string(res.Outcome)).
			Str("actor", actor).Str("remote", r.RemoteAddr).Msg("call resolved over http")
	}
	s.reply(w, r, res, err)
}

func (s *Service) microCallsResolve(ctx context.Context, req micro.Request) (any, error) {
	var cr httpapi.CallResolveRequest
	if err := strictJSON(req.Data(), &cr); err != nil {
		return nil, err
	}
	// Only admin (operators) may send to the micro subjects: docs/security.md#roles.
	return s.ResolveCall(ctx, cr, MicroActor, httpapi.RoleOperator)
}
