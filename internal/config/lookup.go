package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// What the services ask of a loaded configuration: a tool by id, its pin, paths, costs.

// MCPPrefix is the id prefix of tools served by MCP server name.
func MCPPrefix(server string) string { return "mcp__" + server + "__" }

// Names returns the subject, stream and bucket names of this configuration.
func (c *Config) Names() contracts.Names {
	n := contracts.NewNames(c.Prefix)
	n.Partitions = c.Storage.Partitions
	return n
}

// Tool looks a tool up by id in the trusted registry. Tools of configured MCP servers
// (mcp__{server}__{tool}) resolve to a brain tool with no recovery capability; whether the
// server really offers it is decided by brain-exec at dispatch.
func (c *Config) Tool(id string) (Tool, bool) {
	if i, ok := c.byID[id]; ok {
		return c.Tools[i], true
	}
	s, ok := c.mcpServerOf(id)
	if !ok {
		return Tool{}, false
	}
	t := Tool{ID: id, Kind: contracts.KindRegular, Target: contracts.TargetBrain,
		Capability: contracts.CapabilityNonRecoverable}
	if a, ok := c.trustedAnnotations(s, id); ok && a.ReplaySafe() {
		t.Capability = contracts.CapabilityReplaySafe
		t.Recovery = &RecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: int(contracts.DefaultMaxAttempts)}
	}
	if a, ok := c.trustedAnnotations(s, id); ok && s.ParallelReadOnly && a.ReadOnly() {
		t.Parallel = true
	}
	return t, true
}

// mcpServerOf returns the configured MCP server whose tool id names.
func (c *Config) mcpServerOf(id string) (MCPServer, bool) {
	for _, s := range c.Executors.MCP {
		if rest, ok := strings.CutPrefix(id, MCPPrefix(s.Name)); ok && rest != "" {
			return s, true
		}
	}
	return MCPServer{}, false
}

// MCPReconcileTool returns the tool id (mcp__{server}__{companion}) of the companion that
// reconciles MCP tool id, false when id is no MCP tool or its server configures none.
func (c *Config) MCPReconcileTool(id string) (string, bool) {
	s, ok := c.mcpServerOf(id)
	if !ok {
		return "", false
	}
	r, ok := s.Reconcile[strings.TrimPrefix(id, MCPPrefix(s.Name))]
	if !ok {
		return "", false
	}
	return MCPPrefix(s.Name) + r.Tool, true
}

// trustedAnnotations returns the annotations of MCP tool id of server s when s is trusted
// and its executor published the tool.
func (c *Config) trustedAnnotations(s MCPServer, id string) (contracts.ToolAnnotations, bool) {
	if !s.TrustAnnotations || c.Annotations == nil {
		return contracts.ToolAnnotations{}, false
	}
	return c.Annotations.Annotations(id)
}

// TrustsAnnotations reports whether some configured MCP server has trust_annotations.
func (c *Config) TrustsAnnotations() bool {
	return slices.ContainsFunc(c.Executors.MCP, func(s MCPServer) bool { return s.TrustAnnotations })
}

// AnnotationBehavior is the behaviour the trusted annotations of toolID give its calls that
// no host rule matches (see [contracts.ToolAnnotations.DefaultBehavior]); ok is false when
// the tool is not an MCP tool of a trusted server, its executor published no descriptor of
// it, or its annotations say neither read-only nor destructive.
func (c *Config) AnnotationBehavior(toolID string) (contracts.PolicyBehavior, bool) {
	s, ok := c.mcpServerOf(toolID)
	if !ok {
		return "", false
	}
	a, ok := c.trustedAnnotations(s, toolID)
	if !ok {
		return "", false
	}
	b := a.DefaultBehavior()
	return b, b != ""
}

// Pin resolves what the batcher pins into a call of toolID when its batch is created.
func (c *Config) Pin(toolID string) contracts.PinnedCall {
	t, ok := c.Tool(toolID)
	if !ok {
		return contracts.PinnedCall{Known: false, Policy: contracts.DefaultRecoveryPolicy()}
	}
	// A delegation always pins durable_request, whatever its configuration says.
	return contracts.PinnedCall{Known: true, Target: t.Target, Kind: t.Kind,
		Policy: contracts.PinRecoveryPolicy(t.Kind, true, t.RecoveryPolicy())}
}

// ModulePath resolves a sandbox tool's module path against the configuration directory.
func (c *Config) ModulePath(t Tool) string {
	if t.Module == "" || filepath.IsAbs(t.Module) || c.Dir == "" {
		return t.Module
	}
	return filepath.Join(c.Dir, t.Module)
}

// ReconcileModulePath is the path of t's reconcile module, resolved as [Config.ModulePath].
func (c *Config) ReconcileModulePath(t Tool) string {
	if t.ReconcileModule == "" || filepath.IsAbs(t.ReconcileModule) || c.Dir == "" {
		return t.ReconcileModule
	}
	return filepath.Join(c.Dir, t.ReconcileModule)
}

// Validate applies defaults and validates a configuration built or changed in code (tests,
// embedding programs), exactly as Load does for a file.
func (c *Config) Validate() error { return c.normalize() }

// checkBudgetCosts refuses a budget limit that matches a registered tool without a cost
// (its calls could not be charged), or no registered tool at all (it would charge nothing
// and block every call it matches: a call of a tool without a cost fails closed).
func (c *Config) checkBudgetCosts(p *contracts.Policy) error {
	for _, l := range p.Limits() {
		if l.Kind != contracts.LimitBudget {
			continue
		}
		field := fmt.Sprintf("policy.limits[%d] (%s).tools", l.Index, l.Name)
		matched := false
		for i := range c.Tools {
			t := &c.Tools[i]
			if !l.MatchesTool(t.ID) {
				continue
			}
			matched = true
			if t.Cost == nil {
				return &FieldError{field, fmt.Sprintf("budget limit %s matches tool %s, which has no cost (set tools[%d].cost)", l.Name, t.ID, i)}
			}
		}
		if !matched {
			return &FieldError{field, fmt.Sprintf("budget limit %s matches no registered tool with a cost", l.Name)}
		}
	}
	return nil
}

// ToolCost is the configured cost of one call of toolID, if the tool has one.
func (c *Config) ToolCost(toolID string) (float64, bool) {
	t, ok := c.Tool(toolID)
	if !ok || t.Cost == nil {
		return 0, false
	}
	return *t.Cost, true
}
