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
