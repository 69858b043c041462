package config_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestLoad_example(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatalf("the shipped example must load: %v", err)
	}
	if !mustTool(t, cfg, "lookup").Parallel {
		t.Error("the example's lookup must declare parallel (examples/batch-parallel.json)")
	}
	for _, id := range []string{"echo", "counter", "slow", "lookup", "fail", "delegate", "wc", "ask_me", "later", "forbidden", "stub", "client_pick"} {
		if _, ok := cfg.Tool(id); !ok {
			t.Errorf("example registers no %q (acceptance tests rely on it)", id)
		}
	}
	if p := cfg.Pin("echo"); !p.Known || p.Target != contracts.TargetBrain || p.Policy.Mode != contracts.ModeReplaySafe {
		t.Errorf("echo pinned as %+v", p)
	}
	if p := cfg.Pin("counter"); p.Policy != contracts.DefaultRecoveryPolicy() {
		t.Errorf("counter must default to never_replay: %+v", p)
	}
	if p := cfg.Pin("wc"); p.Target != contracts.TargetSandbox {
		t.Errorf("wc pinned as %+v", p)
	}
	if p := cfg.Pin("delegate"); p.Kind != contracts.KindDelegation || p.Policy.Mode != contracts.ModeDurableRequest {
		t.Errorf("delegate pinned as %+v", p)
	}
	if p := cfg.Pin("nope"); p.Known {
		t.Errorf("unknown tool pinned as known: %+v", p)
	}
	if got := cfg.ModulePath(mustTool(t, cfg, "wc")); !filepath.IsAbs(got) || !strings.HasSuffix(got, filepath.Join("bin", "wasm", "wc.wasm")) {
		t.Errorf("module path %q must resolve against the config file", got)
	}
}

func mustTool(t *testing.T, cfg *config.Config, id string) config.Tool {
	tool, ok := cfg.Tool(id)
	if !ok {
		t.Fatalf("no tool %s", id)
	}
	return tool
}

func TestParse_invalidNamesTheField(t *testing.T) {
	cases := []struct {
		name, yaml, field string
	}{
		{"unknown field", "tools:\n  - id: a\n    colour: red\n", "colour"},
		{"bad target", "tools:\n  - id: a\n    target: cloud\n", "tools[0].target"},
		{"bad kind", "tools:\n  - id: a\n    kind: magic\n", "tools[0].kind"},
		{"duplicate id", "tools:\n  - id: a\n  - id: a\n", "tools[1].id"},
		{"mode widens capability", "tools:\n  - id: a\n    capability: replay_safe\n    recovery_policy: {mode: idempotent}\n", "tools[0].recovery_policy.mode"},
		{"mode without capability", "tools:\n  - id: a\n    recovery_policy: {mode: replay_safe}\n", "tools[0].recovery_policy.mode"},
		{"bad capability", "tools:\n  - id: a\n    capability: sometimes\n", "tools[0].capability"},
		{"sandbox without module", "tools:\n  - id: a\n    target: sandbox\n", "tools[0].module"},
		{"module on a brain tool", "tools:\n  - id: a\n    module: x.wasm\n", "tools[0].module"},
		{"parallel on a regular tool", "tools:\n  - id: a\n    parallel_completion: true\n", "tools[0].parallel_completion"},
		{"parallel on a client-executed tool", "tools:\n  - id: a\n    kind: client_executed\n    parallel: true\n", "tools[0].parallel"},
		{"parallel read-only without trusted annotations", "executors:\n  mcp:\n    - {name: gh, command: x, parallel_read_only: true}\n", "executors.mcp[0].parallel_read_only"},
		{"reserved mcp id", "tools:\n  - id: mcp__x__y\n", "tools[0].id"},
		{"regex in a policy pattern", "policy:\n  rules:\n    - {pattern: 'Bash(command =~ \"x\")', behavior: deny}\n", "policy.rules[0].pattern"},
		{"schedule without delay", "policy:\n  rules:\n    - {pattern: x, behavior: schedule}\n", "policy.rules[0]"},
		{"bad pattern in a shadow rule", "policy:\n  rules:\n    - {pattern: x, behavior: allow}\n    - {pattern: 'y(', behavior: deny, shadow: true}\n", "policy.rules[1].pattern"},
		{"shadow not a boolean", "policy:\n  rules:\n    - {pattern: x, behavior: deny, shadow: maybe}\n", "line 3"},
		{"bad default", "policy:\n  default_behavior: maybe\n", "policy.default_behavior"},
		{"bad duration", "tools:\n  - id: a\n    timeout: soon\n", `"soon"`},
		{"mcp with both transports", "executors:\n  mcp:\n    - {name: gh, command: x, url: http://x}\n", "executors.mcp[0]"},
		{"bad replicas", "storage:\n  replicas: 2\n", "storage.replicas"},
		{"bad prefix", "prefix: 'a b'\n", "prefix"},
		{"ack wait too short", "consumers: {ack_wait: 10ms}\n", "consumers.ack_wait"},
		{"negative brain workers", "executors: {brain: {workers: -1}}\n", "executors.brain.workers"},
		{"negative sandbox workers", "executors: {sandbox: {workers: -2}}\n", "executors.sandbox.workers"},
		{"sandbox memory over 4 GiB", "executors: {sandbox: {default_memory_limit_mib: 4097}}\n", "executors.sandbox.default_memory_limit_mib"},
		{"negative brain retries", "executors: {brain: {unavailable_retries: -1}}\n", "executors.brain.unavailable_retries"},
		{"negative sandbox retries", "executors: {sandbox: {unavailable_retries: -1}}\n", "executors.sandbox.unavailable_retries"},
		{"inline output limit too small", "executors: {inline_output_bytes: 100}\n", "executors.inline_output_bytes"},
		{"inline output limit over 256 KiB", "executors: {inline_output_bytes: 262145}\n", "executors.inline_output_bytes"},
		{"mcp_serve names an unknown tool", "tools:\n  - id: a\nmcp_serve: {tools: [a, b]}\n", "mcp_serve.tools[1]"},
		{"mcp_serve client names an unknown tool", "tools:\n  - id: a\nmcp_serve:\n  clients: [{actor: ide, tools: [nope]}]\n", "mcp_serve.clients[0].tools[0]"},
		{"mcp_serve client twice", "tools:\n  - id: a\nmcp_serve:\n  clients: [{actor: ide, tools: [a]}, {actor: ide, tools: [a]}]\n", "mcp_serve.clients[1].actor"},
		{"mcp_serve client without tools", "mcp_serve:\n  clients: [{actor: ide}]\n", "mcp_serve.clients[0].tools"},
		{"mcp_serve queue bound", "mcp_serve: {max_queued_calls: -1}\n", "mcp_serve.max_queued_calls"},
		{"mcp_serve argument bound", "mcp_serve: {max_argument_bytes: 1048576}\n", "mcp_serve.max_argument_bytes"},
		{"mcp_serve sessions per actor bound", "mcp_serve: {max_sessions_per_actor: -1}\n", "mcp_serve.max_sessions_per_actor"},
		{"mcp_serve sessions below the per-actor bound", "mcp_serve: {max_sessions_per_actor: 10, max_sessions: 5}\n", "mcp_serve.max_sessions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted an invalid configuration")
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}

// TestMCPServe_toolsFor: an actor listed in mcp_serve.clients gets its own list, any
// other the shared one (nil when none: every tool); the bounds default.
func TestMCPServe_toolsFor(t *testing.T) {
	cfg, err := config.Parse([]byte("tools:\n  - id: a\n  - id: b\nmcp_serve:\n  tools: [a, b]\n  clients: [{actor: ide, tools: [a]}, {actor: none, tools: []}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.MCPServe
	if got := m.ToolsFor("ide"); strings.Join(got, ",") != "a" {
		t.Errorf("ide: %v", got)
	}
	if got := m.ToolsFor("none"); got == nil || len(got) != 0 {
		t.Errorf("none: %#v, want an empty list (no tool)", got)
	}
	if got := m.ToolsFor("alice"); strings.Join(got, ",") != "a,b" {
		t.Errorf("alice: %v", got)
	}
	if m.MaxQueuedCalls != 8 || m.MaxArgumentBytes != 64<<10 || m.MaxSessionsPerActor != 64 || m.MaxSessions != 1024 {
		t.Errorf("defaults %d %d %d %d", m.MaxQueuedCalls, m.MaxArgumentBytes, m.MaxSessionsPerActor, m.MaxSessions)
	}
	open, err := config.Parse([]byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := open.MCPServe.ToolsFor("alice"); got != nil {
		t.Errorf("no mcp_serve section: %v, want nil (every tool)", got)
	}
}

func TestTool_mcpToolsResolveToTheBrain(t *testing.T) {
	cfg, err := config.Parse([]byte("executors:\n  mcp:\n    - {name: gh, command: ./gh-mcp}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := cfg.Tool("mcp__gh__create_issue")
	if !ok || tool.Target != contracts.TargetBrain || tool.Capability != contracts.CapabilityNonRecoverable {
		t.Errorf("mcp tool resolved as %+v, %v", tool, ok)
	}
	if _, ok := cfg.Tool("mcp__other__x"); ok {
		t.Error("a tool of an unconfigured MCP server resolved")
	}
	if _, ok := cfg.Tool("mcp__gh__"); ok {
		t.Error("an empty MCP tool name resolved")
	}
}

func TestParse_consumerAckWait(t *testing.T) {
	cfg, err := config.Parse([]byte("consumers: {ack_wait: 2s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Consumers.AckWait.D(); got != 2*time.Second {
		t.Errorf("ack_wait = %s, want 2s", got)
	}
}

// TestParse_executorDefaults: unset executor settings take their documented defaults.
func TestParse_executorDefaults(t *testing.T) {
	cfg, err := config.Parse([]byte("tools:\n  - id: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Executors
	got := []int{e.Brain.Workers, e.Brain.UnavailableRetries, e.Sandbox.Workers, e.Sandbox.UnavailableRetries, e.Sandbox.DefaultMemoryLimitMiB, e.InlineOutputBytes}
	want := []int{16, 3, 4, 3, 64, contracts.DefaultInlineOutputBytes}
	if !slices.Equal(got, want) {
		t.Errorf("brain workers, brain retries, sandbox workers, sandbox retries, memory MiB, inline bytes = %v, want %v", got, want)
	}
	if e.Brain.DefaultTimeout.D() != 5*time.Minute || e.Sandbox.DefaultTimeout.D() != 10*time.Second {
		t.Errorf("default timeouts %v / %v, want 5m / 10s", e.Brain.DefaultTimeout.D(), e.Sandbox.DefaultTimeout.D())
	}
}

// annotations is an [config.AnnotationSource] holding published annotations by tool id.
type annotations map[string]contracts.ToolAnnotations

func (a annotations) Annotations(id string) (contracts.ToolAnnotations, bool) {
	v, ok := a[id]
	return v, ok
}

// TestTool_parallelReadOnlyDeclaresReadOnlyMCPToolsParallel: parallel_read_only makes
// the readOnlyHint tools of a trusted server declare parallel, and no other tool.
func TestTool_parallelReadOnlyDeclaresReadOnlyMCPToolsParallel(t *testing.T) {
	yes, no := true, false
	source := annotations{
		"mcp__gh__get": {ReadOnlyHint: &yes}, "mcp__gh__put": {ReadOnlyHint: &no},
		"mcp__plain__get": {ReadOnlyHint: &yes},
	}
	cfg, err := config.Parse([]byte(`
executors:
  mcp:
    - {name: gh, command: ./gh-mcp, trust_annotations: true, parallel_read_only: true}
    - {name: plain, command: ./plain-mcp, trust_annotations: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Annotations = source
	for id, want := range map[string]bool{"mcp__gh__get": true, "mcp__gh__put": false, "mcp__gh__unlisted": false, "mcp__plain__get": false} {
		if got := mustTool(t, cfg, id).Parallel; got != want {
			t.Errorf("%s parallel = %v, want %v", id, got, want)
		}
	}
}
