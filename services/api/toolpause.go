package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// PauseTool pauses toolID (the kill switch): the pause record is stored in the tool pauses
// bucket, then audited. Once it returns, every gate decision that starts blocks the
// tool's new calls with the pause's reason (see pipeline.Env.ToolPaused). Pausing a
// paused tool replaces its reason and actor. A tool the configuration does not know is
// not_found.
func (s *Service) PauseTool(ctx context.Context, toolID, reason, actor string) (contracts.ToolPauseState, error) {
	kv, key, err := s.pauseTarget(ctx, toolID)
	if err != nil {
		return contracts.ToolPauseState{}, err
	}
	if len(reason) > contracts.MaxPauseReasonLength {
		return contracts.ToolPauseState{}, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "reason is longer than %d bytes", contracts.MaxPauseReasonLength)
	}
	p := contracts.ToolPause{ToolID: toolID, Reason: reason, Actor: actor, PausedAt: s.env.Now()}
	data, err := contracts.EncodeRecord(p)
	if err != nil {
		return contracts.ToolPauseState{}, err
	}
	rev, err := kv.Put(ctx, key, data)
	if err != nil {
		return contracts.ToolPauseState{}, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "store the pause: %v", err)
	}
	if err := s.auditPause(ctx, rev, contracts.ToolPauseAudit{ToolID: toolID, Action: contracts.ToolPauseActionPause,
		Reason: reason, Actor: actor, At: p.PausedAt}); err != nil {
		return contracts.ToolPauseState{}, err
	}
	s.log.Info().Str("tool_id", toolID).Str("actor", actor).Str("reason", reason).Msg("tool paused")
	return contracts.ToolPauseState{ToolID: toolID, Paused: true, Pause: &p}, nil
}

// ResumeTool lifts the pause of toolID, then audits it. New calls are decided by the
// policies again; the calls blocked while paused stay blocked. Resuming a tool that is
// not paused changes nothing and audits nothing.
func (s *Service) ResumeTool(ctx context.Context, toolID, actor string) (contracts.ToolPauseState, error) {
	kv, key, err := s.pauseTarget(ctx, toolID)
	if err != nil {
		return contracts.ToolPauseState{}, err
	}
	// A consistent read (the stream leader's, as the gate reads it): a replica behind the
	// pause's write must not make a resume a silent no-op.
	p, err := s.env.ToolPaused(ctx, toolID)
	if err != nil {
		return contracts.ToolPauseState{}, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "read the pause: %v", err)
	}
	if p == nil {
		return contracts.ToolPauseState{ToolID: toolID}, nil
	}
	if err := kv.Delete(ctx, key); err != nil {
		return contracts.ToolPauseState{}, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "lift the pause: %v", err)
	}
	// The audit id names the pause it lifts (its time), so a retried publish of this
	// resume is deduplicated and a later pause's resume is not.
	if err := s.auditPause(ctx, uint64(p.PausedAt.UnixNano()), contracts.ToolPauseAudit{ToolID: toolID, Action: contracts.ToolPauseActionResume,
		Reason: p.Reason, Actor: actor, At: s.env.Now()}); err != nil {
		return contracts.ToolPauseState{}, err
	}
	s.log.Info().Str("tool_id", toolID).Str("actor", actor).Msg("tool resumed")
	return contracts.ToolPauseState{ToolID: toolID}, nil
}

// pauseTarget checks that the configuration knows toolID and binds the pauses bucket.
func (s *Service) pauseTarget(ctx context.Context, toolID string) (jetstream.KeyValue, string, error) {
	if err := contracts.ValidateToolID(toolID); err != nil {
		return nil, "", apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "%v", err)
	}
	if _, ok := s.env.Config.Tool(toolID); !ok {
		return nil, "", apiErr(http.StatusNotFound, httpapi.CodeNotFound, "no tool %q is configured", toolID)
	}
	kv, err := s.env.ToolPausesBucket(ctx)
	if err != nil {
		return nil, "", apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable,
			"tool pauses bucket (run `awaken setup` to create it): %v", err)
	}
	return kv, contracts.ToolPauseKey(toolID), nil
}

// auditPause publishes the audit record of a pause or resume, under an id derived from
// seq (the pause's revision, or the lifted pause's time) so a retried publish is
// deduplicated.
func (s *Service) auditPause(ctx context.Context, seq uint64, rec contracts.ToolPauseAudit) error {
	id := fmt.Sprintf("toolpause:%s:%d:%s", contracts.ToolPauseKey(rec.ToolID), seq, rec.Action)
	ev, err := s.env.Event(ServiceName, id, contracts.TypeToolPauseAudit, rec)
	if err != nil {
		return err
	}
	if _, err := s.env.Pub.Publish(ctx, s.env.Names.ToolPauseAuditSubject(), ev); err != nil {
		return apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "the tool was %sd but its audit record failed (repeat the request): %v", rec.Action, err)
	}
	return nil
}

// httpPauseTool serves POST /v1/tools/{tool_id}/pause {"reason"}.
func (s *Service) httpPauseTool(w http.ResponseWriter, r *http.Request) {
	s.httpPause(w, r, func(ctx context.Context, req contracts.ToolPauseRequest) (contracts.ToolPauseState, error) {
		return s.PauseTool(ctx, req.ToolID, req.Reason, req.Actor)
	})
}

// httpResumeTool serves POST /v1/tools/{tool_id}/resume.
func (s *Service) httpResumeTool(w http.ResponseWriter, r *http.Request) {
	s.httpPause(w, r, func(ctx context.Context, req contracts.ToolPauseRequest) (contracts.ToolPauseState, error) {
		return s.ResumeTool(ctx, req.ToolID, req.Actor)
	})
}

// httpPause reads a pause or resume request (tool id from the path) and answers with the
// tool's pause state.
func (s *Service) httpPause(w http.ResponseWriter, r *http.Request, do func(context.Context, contracts.ToolPauseRequest) (contracts.ToolPauseState, error)) {
	var req contracts.ToolPauseRequest
	if err := readTargeted(r, "tool_id", &req, &req.ToolID); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Who paused is the authenticated token's name; an actor the body names is kept after
	// it ("alice as oncall"), never instead of it (as for ticket resolutions).
	req.Actor = combineActor(actorOf(r.Context()), req.Actor)
	res, err := do(r.Context(), req)
	s.reply(w, r, res, err)
}

// microPauseTool serves the micro endpoint tools.pause {"tool_id","reason","actor"}.
func (s *Service) microPauseTool(ctx context.Context, req micro.Request) (any, error) {
	pr, err := microPauseRequest(req)
	if err != nil {
		return nil, err
	}
	return s.PauseTool(ctx, pr.ToolID, pr.Reason, pr.Actor)
}

// microResumeTool serves the micro endpoint tools.resume {"tool_id","actor"}.
func (s *Service) microResumeTool(ctx context.Context, req micro.Request) (any, error) {
	pr, err := microPauseRequest(req)
	if err != nil {
		return nil, err
	}
	return s.ResumeTool(ctx, pr.ToolID, pr.Actor)
}

func microPauseRequest(req micro.Request) (contracts.ToolPauseRequest, error) {
	var pr contracts.ToolPauseRequest
	if err := strictJSON(req.Data(), &pr); err != nil {
		return pr, err
	}
	pr.Actor = combineActor(MicroActor, pr.Actor)
	return pr, nil
}
