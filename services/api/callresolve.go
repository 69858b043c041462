package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Codes of a call resolution's refusal.
const (
	// CodeCallNotIndeterminate (409): only an Indeterminate call may be resolved; nothing
	// changed. The message says the call's phase.
	CodeCallNotIndeterminate = "call_not_indeterminate"
	// CodeCallAlreadyResolved (409): another resolution of the call was recorded first;
	// nothing changed. The message says whose.
	CodeCallAlreadyResolved = "call_already_resolved"
	// CodeInvalidResolution (422): the outcome is not ran or not_run, ran has no output or
	// one that is not a valid tool output for the call, not_run has an output, the output
	// stages state, or the note is too long.
	CodeInvalidResolution = "invalid_resolution"
	// CodeCallResolveTimeout (504): the resolution was stored but not seen recorded within
	// the api's wait; the gate still applies it (a batch finalized a moment ago is waited
	// for until its results are published). Sending it again is refused with
	// call_already_resolved once it is recorded.
	CodeCallResolveTimeout = "call_resolve_timeout"
)

// EndpointCallsResolve resolves one indeterminate call and answers once the resolution is
// recorded. Request body: [CallResolveRequest]. Reply: [client.CallResolveResult].
const EndpointCallsResolve = "calls.resolve"

// CallResolveRequest is the body of calls.resolve and POST /v1/calls/{operation_id}/resolve.
type CallResolveRequest struct {
	OperationID string                     `json:"operation_id,omitempty"`
	Outcome     contracts.ReconcileOutcome `json:"outcome"`
	Output      *contracts.ToolOutput      `json:"output,omitempty"`
	Note        string                     `json:"note,omitempty"`
}

// ResolveCall resolves the indeterminate call op on behalf of actor with role, and waits
// (bounded by ResolveTimeout) until the resolution is recorded: "resolved" when the batch
// was not finalized yet (its results carry the resolved output), "corrected" when it was
// (its results keep the indeterminate result and a correction event carries the resolved
// one). An unknown call is 404; a call not Indeterminate 409 call_not_indeterminate; one
// resolved already 409 call_already_resolved; an invalid request 422 invalid_resolution;
// a resolution not seen recorded in time 504 call_resolve_timeout.
func (s *Service) ResolveCall(ctx context.Context, req CallResolveRequest, actor string, role Role) (client.CallResolveResult, error) {
	op := req.OperationID
	if _, _, _, err := contracts.ParseOperationID(op); err != nil {
		return client.CallResolveResult{}, &Error{Code: string(contracts.RejectInvalidID), Message: err.Error(), Status: http.StatusBadRequest, err: err}
	}
	cmd := contracts.CallResolve{OperationID: op, Outcome: req.Outcome, Output: req.Output, Note: req.Note}
	if err := cmd.Validate(); err != nil {
		return client.CallResolveResult{}, &Error{Code: CodeInvalidResolution, Status: http.StatusUnprocessableEntity, err: err, Message: err.Error()}
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
		return client.CallResolveResult{}, &Error{Code: CodeCallNotIndeterminate, Status: http.StatusConflict, err: err,
			Message: fmt.Sprintf("call %s is %s; only an indeterminate call may be resolved, and nothing changed", op, notIndeterminate.Phase)}
	case errors.As(err, &resolved):
		return client.CallResolveResult{}, &Error{Code: CodeCallAlreadyResolved, Status: http.StatusConflict, err: err,
			Message: fmt.Sprintf("call %s was resolved already (%s, by %q); nothing changed", op, resolved.Result.Status, resolved.Result.Actor)}
	case !errors.Is(err, client.ErrCallResolvePending):
		return client.CallResolveResult{}, internalErr(err)
	case ctx.Err() != nil:
		return client.CallResolveResult{}, &Error{Code: CodeUnavailable, Status: http.StatusServiceUnavailable, err: err,
			Message: "the request ended before the resolution was seen recorded; it is stored and will still be applied"}
	}
	return client.CallResolveResult{}, &Error{Code: CodeCallResolveTimeout, Status: http.StatusGatewayTimeout, err: err,
		Message: fmt.Sprintf("the resolution of call %s is stored and will be applied, but was not seen recorded within %s", op, s.opts.ResolveTimeout)}
}

func (s *Service) httpResolveCall(w http.ResponseWriter, r *http.Request) {
	var req CallResolveRequest
	if err := readBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := pathValue(r, "operation_id", req.OperationID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.OperationID = op
	actor := actorOf(r.Context())
	res, err := s.ResolveCall(r.Context(), req, actor, RoleOperator)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info().Str("operation_id", op).Str("status", res.Status).Str("outcome", string(res.Outcome)).
		Str("actor", actor).Str("remote", r.RemoteAddr).Msg("call resolved over http")
	writeJSON(w, http.StatusOK, res)
}

func (s *Service) microCallsResolve(ctx context.Context, req micro.Request) (any, error) {
	var cr CallResolveRequest
	if err := strictJSON(req.Data(), &cr); err != nil {
		return nil, err
	}
	// Only admin (operators) may send to the micro subjects: docs/security.md#roles.
	return s.ResolveCall(ctx, cr, MicroActor, RoleOperator)
}
