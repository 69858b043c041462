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
