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
