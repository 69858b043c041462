package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// emptyParameters is the schema of a tool nothing describes: an object, any properties.
var emptyParameters = json.RawMessage(`{"properties":{},"type":"object"}`)

// Catalog returns every tool of the trusted configuration in its order, each marked paused
// while an operator has paused it, then the current
// tools of the configured MCP servers, each with the JSON Schema of its arguments from the
// one place it is defined: for a tool run by brain-exec the descriptor brain-exec published
// of its implementation (derived from the Go argument type, or the MCP server's
// inputSchema), otherwise the configuration's parameters. The published descriptors only
// describe: a tool the configuration does not name never appears.
func (s *Service) Catalog(ctx context.Context) ([]contracts.CatalogTool, error) {
	published, err := s.publishedDescriptors(ctx, contracts.TargetBrain)
	if err != nil {
		return nil, err
	}
	pauses, err := s.env.ToolPauses(ctx)
	if err != nil {
		return nil, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "%v", err)
	}
	cfg := s.env.Config
	out := make([]contracts.CatalogTool, 0, len(cfg.Tools))
	// listed keeps every id once: a configured tool may shadow an MCP server's tool of
	// the same id, which the configuration's entry then describes alone.
	listed := make(map[string]bool, len(cfg.Tools))
	for _, t := range cfg.Tools {
		listed[t.ID] = true
		ct := contracts.CatalogTool{ID: t.ID, Description: t.Description, Parameters: t.ParametersJSON(),
			Kind: t.Kind, Target: t.Target, Capability: t.EffectiveCapability()}
		ct.MarkPaused(pauses)
		if d, ok := published[t.Builtin]; ok && runsInBrain(t) {
			ct.Parameters = d.Parameters
			if ct.Description == "" {
				ct.Description = d.Description
			}
		}
		if len(ct.Parameters) == 0 {
			ct.Parameters = emptyParameters
		}
		out = append(out, ct)
	}
	for _, srv := range cfg.Executors.MCP {
		prefix := config.MCPPrefix(srv.Name)
		for _, d := range publishedInOrder(published) {
			if !strings.HasPrefix(d.ID, prefix) || listed[d.ID] {
				continue
			}
			listed[d.ID] = true
			t, ok := cfg.Tool(d.ID)
			if !ok {
				continue
			}
			ct := contracts.CatalogTool{ID: d.ID, Description: d.Description, Parameters: d.Parameters,
				Kind: t.Kind, Target: t.Target, Capability: t.EffectiveCapability(), Annotations: d.Annotations}
			ct.MarkPaused(pauses)
			out = append(out, ct)
		}
	}
	return out, nil
}

// runsInBrain reports whether brain-exec runs t's calls (not client-executed, not answered
// by the gate with a fixed result).
func runsInBrain(t config.Tool) bool {
	return t.Target == contracts.TargetBrain && t.Kind != contracts.KindClientExecuted && t.SetResult == nil
}

// publishedDescriptors reads what the executor of target published (none yet: empty).
func (s *Service) publishedDescriptors(ctx context.Context, target contracts.ToolExecutionTarget) (map[string]contracts.ToolDescriptor, error) {
	out := map[string]contracts.ToolDescriptor{}
	kv, err := s.env.JS.KeyValue(ctx, s.env.Names.ToolsBucket())
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return out, nil
		}
		return nil, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "tools bucket: %v", err)
	}
	e, err := kv.Get(ctx, contracts.ToolDescriptorsKey(target))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "tool descriptors: %v", err)
	}
	descs, err := bus.Decode[[]contracts.ToolDescriptor](e.Value())
	if err != nil {
		s.log.Error().Err(err).Str("target", string(target)).Msg("published tool descriptors refused: they do not decode strictly")
		return out, nil
	}
	for _, d := range descs {
		out[d.ID] = d
	}
	return out, nil
}

// publishedInOrder returns the descriptors sorted by id (executors publish them so).
func publishedInOrder(m map[string]contracts.ToolDescriptor) []contracts.ToolDescriptor {
	out := make([]contracts.ToolDescriptor, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b contracts.ToolDescriptor) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// toolsDocument builds the catalog reply for a format and agent-tools narrowing.
func (s *Service) toolsDocument(ctx context.Context, req contracts.ToolsRequest) (any, error) {
	tools, err := s.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	doc, err := contracts.RenderCatalogFor(contracts.NarrowCatalog(tools, req.AgentTools), req)
	if err != nil {
		return nil, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "%v", err)
	}
	return doc, nil
}

// httpTools serves GET /v1/tools[?format=awaken|openai|openai-responses|anthropic|mcp][&agent_tools=a,b][&strict=true].
func (s *Service) httpTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := contracts.ToolsRequest{Format: q.Get("format")}
	if q.Has("strict") {
		strict, err := strconv.ParseBool(q.Get("strict"))
		if err != nil {
			s.writeError(w, r, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "strict %q is not true or false", q.Get("strict")))
			return
		}
		req.Strict = strict
	}
	if q.Has("agent_tools") {
		req.AgentTools = []string{}
		for _, id := range strings.Split(q.Get("agent_tools"), ",") {
			if id = strings.TrimSpace(id); id != "" {
				req.AgentTools = append(req.AgentTools, id)
			}
		}
	}
	doc, err := s.toolsDocument(r.Context(), req)
	s.reply(w, r, doc, err)
}

// microToolsList serves the micro endpoint tools.list.
func (s *Service) microToolsList(ctx context.Context, req micro.Request) (any, error) {
	var tr contracts.ToolsRequest
	if data := strings.TrimSpace(string(req.Data())); data != "" {
		if err := json.Unmarshal([]byte(data), &tr); err != nil {
			return nil, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "%v", fmt.Errorf("tools request: %w", err))
		}
	}
	return s.toolsDocument(ctx, tr)
}

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
	data, err := json.Marshal(p)
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
	kv, err := s.env.JS.KeyValue(ctx, s.env.Names.ToolPausesBucket())
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
