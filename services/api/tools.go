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
	kv, err := s.env.ToolsBucket(ctx)
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
