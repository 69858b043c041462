// Package config loads and validates the host configuration: the trusted tool registry, the
// host permission policy and the executor settings. Every service loads the same file; an
// invalid file stops the service at start with an error naming the bad field.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid configuration")

// FieldError names the field of the configuration that is wrong and why.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap lets callers test for [ErrInvalid].
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Config is the whole host configuration.
type Config struct {
	// Prefix is the subject prefix of every awaken subject (default "awaken").
	Prefix string `yaml:"prefix"`
	// Tools is the trusted tool registry: what runs where, and how it may be recovered.
	Tools []Tool `yaml:"tools"`
	// Policy is the host permission policy; a batch's run policy can only narrow it.
	Policy contracts.PolicyConfig `yaml:"policy"`
	// Executors holds the settings of brain-exec and sandbox-exec.
	Executors Executors `yaml:"executors"`
	// Storage holds the JetStream settings of every stream and bucket.
	Storage Storage `yaml:"storage"`
	// Consumers tunes the durable consumers of every service (zero values keep each
	// service's defaults).
	Consumers Consumers `yaml:"consumers"`
	// MCPServe configures awaken as an MCP server (the api's /mcp route and
	// `awaken mcp-serve`): which tools each client is offered and the bounds of a session.
	MCPServe MCPServe `yaml:"mcp_serve"`
	// Audit configures the tamper-evident audit trail: the key that signs it.
	Audit Audit `yaml:"audit"`
	// Retention says how long each kind of record is kept (docs/operations.md, "Data
	// lifecycle"); `awaken setup` and every service's start apply it to the streams and
	// buckets.
	Retention Retention `yaml:"retention"`
	// Formats says which record and message formats the services write during a rolling
	// upgrade (docs/operations.md, "Upgrades and compatibility"): "previous" (the
	// default) writes only what the previous version reads, so both versions run side by
	// side; "current" writes this version's new formats, once no service of the previous
	// version runs.
	Formats string `yaml:"formats"`

	// Dir is the directory of the file the configuration was loaded from; relative module
	// paths resolve against it.
	Dir string `yaml:"-"`
	// Source is the path the configuration was loaded from.
	Source string `yaml:"-"`
	// Annotations is where the trusted MCP servers' tool annotations are read (set by
	// the process wiring when some server has trust_annotations; nil: none are used).
	Annotations AnnotationSource `yaml:"-"`

	byID map[string]int
}

// Tool is one registered tool.
type Tool struct {
	ID          string `yaml:"id"`
	Description string `yaml:"description"`
	// Parameters is the JSON Schema of the arguments. Builtin brain tools derive it from
	// their Go argument type when it is omitted.
	Parameters any                           `yaml:"parameters"`
	Kind       contracts.ToolKind            `yaml:"kind"`
	Target     contracts.ToolExecutionTarget `yaml:"target"`
	// Capability is the trusted recovery capability of the executable.
	Capability contracts.ToolRecoveryCapability `yaml:"capability"`
	// Recovery is the pinned recovery policy (default never_replay, 3 attempts). Its mode must
	// be never_replay or equal the capability.
	Recovery *RecoveryPolicy `yaml:"recovery_policy"`
	// ParallelCompletion lets a batch made only of calls to this delegation tool run them
	// concurrently once every gate allowed them.
	ParallelCompletion bool `yaml:"parallel_completion"`
	// Parallel declares that calls of this tool may run concurrently with each other and
	// with calls of other tools that declare it: a batch whose calls all declare it is gated
	// in model order first, every decision recorded, and then its allowed calls run at once.
	// A batch with any call that does not declare it runs one call after another.
	Parallel bool `yaml:"parallel"`
	// Timeout ends one invocation with the execution error "timed out".
	Timeout contracts.Duration `yaml:"timeout"`
	// Builtin names the Go implementation of a brain tool in brain-exec's registry
	// (default: the tool id).
	Builtin string `yaml:"builtin"`
	// Module is the WebAssembly module of a sandbox tool (relative to the configuration file).
	Module string `yaml:"module"`
	// ReconcileModule is the WebAssembly module that reconciles a sandbox tool after a
	// crash left a call of it entered and unfinished: run like the tool (the call's
	// arguments on stdin, its idempotency key in AWAKEN_IDEMPOTENCY_KEY, the tool's
	// limits), it answers on stdout {"outcome": ran|not_run|unknown, "output"?: text}.
	ReconcileModule string `yaml:"reconcile_module"`
	// MemoryLimitMiB, MaxOutputBytes and Scratch bound a sandbox tool.
	MemoryLimitMiB int  `yaml:"memory_limit_mib"`
	MaxOutputBytes int  `yaml:"max_output_bytes"`
	Scratch        bool `yaml:"scratch"`
	// SetResult makes the gate answer every call of this tool with this fixed output and
	// enter no executor (dry runs, maintenance).
	SetResult *FixedResult `yaml:"set_result"`
	// Cost is what one call of the tool costs against the host policy's budget limits
	// (contracts.LimitConfig.Budget); a budget limit may only match tools that have one.
	Cost *float64 `yaml:"cost"`

	// schema is Parameters compiled, set by normalize (nil when none is configured).
	schema *jsonschema.Schema
}

// RecoveryPolicy is the configuration form of [contracts.ToolRecoveryPolicy].
type RecoveryPolicy struct {
	Mode        contracts.ToolRecoveryMode `yaml:"mode"`
	MaxAttempts int                        `yaml:"max_attempts"`
}

// FixedResult is a tool output fixed by the host.
type FixedResult struct {
	Text    string `yaml:"text"`
	IsError bool   `yaml:"is_error"`
}

// Executors holds executor settings.
type Executors struct {
	Brain   BrainExecutor   `yaml:"brain"`
	Sandbox SandboxExecutor `yaml:"sandbox"`
	// MCP lists the MCP servers whose tools brain-exec mounts as mcp__{server}__{tool}.
	MCP []MCPServer `yaml:"mcp"`
	// BodyLedger makes both executors count every start of a tool body in the counters
	// bucket under "ledger.{run}.{step}.{call}": an independent witness, beside the call
	// records, of how many times each operation's body ran, which the chaos checker and
	// the tests read. It costs one more key-value write on the path of every call, so it
	// is off unless asked for.
	BodyLedger bool `yaml:"body_ledger"`
	// InlineOutputBytes is the largest output (its JSON) carried inline in call records
	// and results (default and maximum 262144, minimum 1024). A larger one — up to the hard
	// limit of 64 MiB — is stored in the objects bucket and the result carries a
	// resource_link to it.
	InlineOutputBytes int `yaml:"inline_output_bytes"`
	// TraceToolContent records each call's arguments (gen_ai.tool.call.arguments) and
	// result (gen_ai.tool.call.result) on its execute_tool span. Off by default: they may
	// hold personal or secret data, and the OpenTelemetry GenAI conventions make them opt-in.
	TraceToolContent bool `yaml:"trace_tool_content"`
	// Reconcile bounds the reconcile of a call whose tool has a reconcile function and
	// whose executor died after entering it (docs/protocol.md, Recovery).
	Reconcile Reconcile `yaml:"reconcile"`
}

// BrainExecutor configures brain-exec.
type BrainExecutor struct {
	// Workers is how many calls one replica runs at once (default 16).
	Workers int `yaml:"workers"`
	// DefaultTimeout bounds a tool without its own timeout (default 5m).
	DefaultTimeout contracts.Duration `yaml:"default_timeout"`
	// UnavailableRetries is how many times a call that failed before dispatch is retried
	// without counting as a replay (default 3).
	UnavailableRetries int `yaml:"unavailable_retries"`
}

// SandboxExecutor configures sandbox-exec.
type SandboxExecutor struct {
	// Enabled turns the WebAssembly runtime on; without it a sandbox call completes with
	// "sandbox executor unavailable for tool {id}".
	Enabled bool `yaml:"enabled"`
	Workers int  `yaml:"workers"`
	// DefaultMemoryLimitMiB and DefaultTimeout bound modules without their own limits.
	DefaultMemoryLimitMiB int                `yaml:"default_memory_limit_mib"`
	DefaultTimeout        contracts.Duration `yaml:"default_timeout"`
	// CacheDir keeps compiled modules across restarts (optional).
	CacheDir string `yaml:"cache_dir"`
	// UnavailableRetries is how many times a call whose module could not be loaded (it
	// never started) is retried without counting as a replay (default 3).
	UnavailableRetries int `yaml:"unavailable_retries"`
}

// MCPServer names one MCP server: a stdio command or a streamable HTTP URL.
type MCPServer struct {
	Name    string   `yaml:"name"`
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	URL     string   `yaml:"url"`
	// TrustAnnotations lets the annotations this server lists for its tools steer the
	// host (default false: the MCP specification says annotations from untrusted servers
	// must not steer decisions). Where no host rule matches a tool, readOnlyHint allows
	// and destructiveHint asks; idempotentHint with openWorldHint false pins the tool's
	// calls replay_safe. A host rule always wins.
	TrustAnnotations bool `yaml:"trust_annotations"`
	// ParallelReadOnly makes the tools this server annotates readOnlyHint declare
	// parallel (see [Tool.Parallel]); it needs trust_annotations.
	ParallelReadOnly bool `yaml:"parallel_read_only"`
	// Reconcile maps a tool of this server (its name on the server) to the companion tool
	// of the same server that reconciles it: after an executor crash left a call of the
	// tool entered and unfinished, brain-exec calls the companion with the call's
	// arguments and its idempotency key in _meta, and the companion answers ran (with the
	// output), not_run or unknown (docs/integration.md).
	Reconcile map[string]MCPReconcile `yaml:"reconcile"`
}

// MCPReconcile names the companion tool that reconciles an MCP tool.
type MCPReconcile struct {
	// Tool is the companion's name on the same server.
	Tool string `yaml:"tool"`
}

// Reconcile bounds how brain-exec and sandbox-exec reconcile a call after a crash.
type Reconcile struct {
	// Attempts is how many times the reconcile is called while it fails or answers
	// unknown (default 3).
	Attempts int `yaml:"attempts"`
	// Backoff is the delay before the second call, doubling after each (default 200ms).
	Backoff contracts.Duration `yaml:"backoff"`
	// Timeout bounds one call of the reconcile (default 10s); past it the call counts as
	// unknown.
	Timeout contracts.Duration `yaml:"timeout"`
	// Bound is how long a reconcile may keep its call, and so its batch, unfinished
	// (default 1m); past it the call is published indeterminate.
	Bound contracts.Duration `yaml:"bound"`
}

// AnnotationSource answers the annotations the executor published for an MCP tool (ok
// false: it published no descriptor of the tool).
type AnnotationSource interface {
	Annotations(toolID string) (contracts.ToolAnnotations, bool)
}

// ToolLister is an [AnnotationSource] that also lists the ids of the tools the executors
// published (the view the services watch does): [Config.ResolveToolName] resolves the
// provider-safe names of MCP tools against it.
type ToolLister interface {
	ToolIDs(yield func(string) bool)
}

// ResolveToolName returns the tool id a submission's tool name stands for, from the trusted
// registry only: the name itself when it is a configured tool or a published one, else the
// configured or published tool whose provider-safe name ([contracts.SafeToolName], what the
// provider catalog formats list) it is; else the name unchanged (an unknown tool, as
// before).
func (c *Config) ResolveToolName(name string) string {
	if _, ok := c.byID[name]; ok {
		return name
	}
	lister, _ := c.Annotations.(ToolLister)
	ids := func(yield func(string) bool) {
		for _, t := range c.Tools {
			if !yield(t.ID) {
				return
			}
		}
		if lister != nil {
			lister.ToolIDs(yield)
		}
	}
	if id, ok := contracts.ResolveToolName(name, ids); ok {
		return id
	}
	return name
}

// Storage configures streams and buckets.
type Storage struct {
	// Replicas of every stream and bucket (1 or 3; default 1).
	Replicas int `yaml:"replicas"`
	// Memory keeps streams in memory instead of files (tests and benchmarks only).
	Memory bool `yaml:"memory"`
	// Partitions is the deployment's partition count P (0 or 1: one partition; at most
	// [MaxPartitions]). `awaken setup` records it; every service and client reads the
	// recorded value and a service configured otherwise refuses to start
	// (docs/configuration.md, docs/operations.md "Partitions").
	Partitions int `yaml:"partitions"`
}

// MaxPartitions bounds storage.partitions: each partition is five stores more.
const MaxPartitions = 64

// Consumers tunes the durable consumers every service creates. It exists for tests and
// chaos runs, which need a crashed process's unacknowledged messages redelivered within
// seconds; production deployments normally leave it empty and keep the services' defaults.
type Consumers struct {
	// AckWait is how long the server waits for a settlement before it redelivers a message
	// to another process (0: each service's default, 30 s). Running handlers are
	// heartbeated, so it bounds only how long a crashed process holds a message, never how
	// long a tool may run. Applied to every consumer of every service.
	AckWait contracts.Duration `yaml:"ack_wait"`
}

// MCPServe configures awaken as an MCP server (docs/configuration.md#awaken-as-an-mcp-server).
type MCPServe struct {
	// Tools narrows the tools every MCP client is offered (and may call) to these ids;
	// empty: every tool of the catalog.
	Tools []string `yaml:"tools"`
	// Clients narrows further per authenticated actor: over HTTP the name of the api token
	// the client sends, for `awaken mcp-serve` its --actor. An actor not listed gets Tools.
	Clients []MCPServeClient `yaml:"clients"`
	// MaxQueuedCalls bounds the calls of one session that are running or waiting for
	// their turn (calls of a session run one at a time, in arrival order); past it a call
	// is refused at once (default 8).
	MaxQueuedCalls int `yaml:"max_queued_calls"`
	// MaxArgumentBytes bounds the JSON arguments of one call (default 65536, at most the
	// submission limit).
	MaxArgumentBytes int `yaml:"max_argument_bytes"`
	// MaxSessionsPerActor bounds the open Streamable HTTP sessions of one authenticated
	// actor (default 64): each holds memory until it is deleted or idle for an hour, so
	// one token must not be able to take the api's memory. Past it a new session is refused
	// (429, too_many_sessions).
	MaxSessionsPerActor int `yaml:"max_sessions_per_actor"`
	// MaxSessions bounds the open Streamable HTTP sessions of all actors together
	// (default 1024, at least MaxSessionsPerActor).
	MaxSessions int `yaml:"max_sessions"`
}

// MCPServeClient is the tool list of one MCP client, found by its authenticated actor.
type MCPServeClient struct {
	Actor string   `yaml:"actor"`
	Tools []string `yaml:"tools"`
}

// ToolsFor returns the tool ids an MCP client authenticated as actor is offered (nil:
// every tool).
func (m MCPServe) ToolsFor(actor string) []string {
	for _, c := range m.Clients {
		if c.Actor == actor {
			return c.Tools
		}
	}
	if len(m.Tools) == 0 {
		return nil
	}
	return m.Tools
}

func (c *Config) normalizeMCPServe() error {
	m := &c.MCPServe
	known := func(f string, ids []string) error {
		for i, id := range ids {
			if _, ok := c.Tool(id); !ok {
				return &FieldError{fmt.Sprintf("%s[%d]", f, i), fmt.Sprintf("%q is not a configured tool (nor a tool of a configured MCP server)", id)}
			}
		}
		return nil
	}
	if err := known("mcp_serve.tools", m.Tools); err != nil {
		return err
	}
	actors := map[string]bool{}
	for i, cl := range m.Clients {
		f := fmt.Sprintf("mcp_serve.clients[%d]", i)
		if cl.Actor == "" || actors[cl.Actor] {
			return &FieldError{f + ".actor", fmt.Sprintf("%q must be set and listed once", cl.Actor)}
		}
		actors[cl.Actor] = true
		if cl.Tools == nil {
			return &FieldError{f + ".tools", "must list the tools of the client (an empty list offers none)"}
		}
		if err := known(f+".tools", cl.Tools); err != nil {
			return err
		}
	}
	if m.MaxQueuedCalls == 0 {
		m.MaxQueuedCalls = 8
	}
	if m.MaxQueuedCalls < 1 || m.MaxQueuedCalls > 1024 {
		return &FieldError{"mcp_serve.max_queued_calls", "must be within 1..1024"}
	}
	if m.MaxArgumentBytes == 0 {
		m.MaxArgumentBytes = 64 << 10
	}
	if m.MaxArgumentBytes < 2 || m.MaxArgumentBytes > contracts.MaxSubmissionBytes/2 {
		return &FieldError{"mcp_serve.max_argument_bytes", fmt.Sprintf("must be within 2..%d", contracts.MaxSubmissionBytes/2)}
	}
	if m.MaxSessionsPerActor == 0 {
		m.MaxSessionsPerActor = 64
	}
	if m.MaxSessionsPerActor < 1 || m.MaxSessionsPerActor > 65536 {
		return &FieldError{"mcp_serve.max_sessions_per_actor", "must be within 1..65536"}
	}
	if m.MaxSessions == 0 {
		m.MaxSessions = max(1024, m.MaxSessionsPerActor)
	}
	if m.MaxSessions < m.MaxSessionsPerActor || m.MaxSessions > 65536 {
		return &FieldError{"mcp_serve.max_sessions", fmt.Sprintf("must be within max_sessions_per_actor (%d)..65536", m.MaxSessionsPerActor)}
	}
	return nil
}

// Load reads, parses and validates the configuration at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	abs, _ := filepath.Abs(path)
	cfg.Source = abs
	cfg.Dir = filepath.Dir(abs)
	if dir := os.Getenv(EnvSandboxCacheDir); dir != "" {
		cfg.Executors.Sandbox.CacheDir = dir
	}
	return cfg, nil
}

// EnvSandboxCacheDir, when set, overrides executors.sandbox.cache_dir of every
// configuration file loaded: one deployment-wide place for compiled WebAssembly without
// editing the file (a container's volume, or a test run's temporary directory).
const EnvSandboxCacheDir = "AWAKEN_SANDBOX_CACHE_DIR"

// Parse decodes YAML (or JSON, a subset of YAML) strictly — an unknown field is an error —
// then applies defaults and validates.
func Parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, fe
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// The values of the formats setting.
const (
	// FormatsPrevious: write only the formats the previous version reads (the default).
	FormatsPrevious = "previous"
	// FormatsCurrent: write this version's new formats.
	FormatsCurrent = "current"
)

// WritesNewFormats reports whether the services write this version's new formats.
func (c *Config) WritesNewFormats() bool { return c.Formats == FormatsCurrent }

func (c *Config) normalize() error {
	if c.Prefix == "" {
		c.Prefix = contracts.DefaultPrefix
	}
	if err := validatePrefix(c.Prefix); err != nil {
		return &FieldError{"prefix", err.Error()}
	}
	if err := c.Audit.validate(); err != nil {
		return err
	}
	if err := c.Retention.validate(); err != nil {
		return err
	}
	switch c.Formats {
	case "":
		c.Formats = FormatsPrevious
	case FormatsPrevious, FormatsCurrent:
	default:
		return &FieldError{"formats", fmt.Sprintf("%q is neither %q nor %q", c.Formats, FormatsPrevious, FormatsCurrent)}
	}
	c.byID = make(map[string]int, len(c.Tools))
	for i := range c.Tools {
		if err := c.Tools[i].normalize(fmt.Sprintf("tools[%d]", i)); err != nil {
			return err
		}
		if j, dup := c.byID[c.Tools[i].ID]; dup {
			return &FieldError{fmt.Sprintf("tools[%d].id", i), fmt.Sprintf("%q is already registered by tools[%d]", c.Tools[i].ID, j)}
		}
		c.byID[c.Tools[i].ID] = i
	}
	compiled, err := contracts.CompilePolicy(c.Policy)
	if err != nil {
		var pe *contracts.PolicyError
		if errors.As(err, &pe) {
			return &FieldError{"policy." + pe.Field, pe.Msg}
		}
		return &FieldError{"policy", err.Error()}
	}
	if err := c.checkBudgetCosts(compiled); err != nil {
		return err
	}
	e := &c.Executors
	if e.Brain.DefaultTimeout == 0 {
		e.Brain.DefaultTimeout = contracts.Duration(5 * time.Minute)
	}
	if e.Sandbox.DefaultTimeout == 0 {
		e.Sandbox.DefaultTimeout = contracts.Duration(10 * time.Second)
	}
	for _, f := range []intSetting{
		{"executors.brain.workers", &e.Brain.Workers, 16, 1, math.MaxInt, "must be positive"},
		{"executors.brain.unavailable_retries", &e.Brain.UnavailableRetries, 3, 0, math.MaxInt, "must not be negative"},
		{"executors.sandbox.workers", &e.Sandbox.Workers, 4, 1, math.MaxInt, "must be positive"},
		{"executors.sandbox.unavailable_retries", &e.Sandbox.UnavailableRetries, 3, 0, math.MaxInt, "must not be negative"},
		{"executors.sandbox.default_memory_limit_mib", &e.Sandbox.DefaultMemoryLimitMiB, 64, 1, 4096, "must be within 1..4096"},
		{"executors.inline_output_bytes", &e.InlineOutputBytes, contracts.DefaultInlineOutputBytes, 1024, contracts.DefaultInlineOutputBytes,
			fmt.Sprintf("must be within 1024..%d", contracts.DefaultInlineOutputBytes)},
	} {
		if err := f.apply(); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for i, s := range e.MCP {
		f := fmt.Sprintf("executors.mcp[%d]", i)
		if err := contracts.ValidateID(f+".name", s.Name); err != nil || strings.Contains(s.Name, "__") {
			return &FieldError{f + ".name", fmt.Sprintf("%q must match [A-Za-z0-9_-]+ without \"__\"", s.Name)}
		}
		if seen[s.Name] {
			return &FieldError{f + ".name", fmt.Sprintf("%q is declared twice", s.Name)}
		}
		seen[s.Name] = true
		if (s.Command == "") == (s.URL == "") {
			return &FieldError{f, "set exactly one of command (stdio) or url (streamable HTTP)"}
		}
		if s.ParallelReadOnly && !s.TrustAnnotations {
			return &FieldError{f + ".parallel_read_only", "reads readOnlyHint, which only a server with trust_annotations may steer"}
		}
		for tool, r := range s.Reconcile {
			if tool == "" || r.Tool == "" || r.Tool == tool {
				return &FieldError{f + ".reconcile", fmt.Sprintf("tool %q: name a companion tool of the server other than the tool itself", tool)}
			}
		}
	}
	r := &e.Reconcile
	if r.Attempts == 0 {
		r.Attempts = 3
	}
	if r.Backoff == 0 {
		r.Backoff = contracts.Duration(200 * time.Millisecond)
	}
	if r.Timeout == 0 {
		r.Timeout = contracts.Duration(10 * time.Second)
	}
	if r.Bound == 0 {
		r.Bound = contracts.Duration(time.Minute)
	}
	if r.Attempts < 0 || r.Backoff < 0 || r.Timeout < 0 || r.Bound < 0 {
		return &FieldError{"executors.reconcile", "attempts, backoff, timeout and bound must not be negative"}
	}
	if c.Consumers.AckWait < 0 || (c.Consumers.AckWait > 0 && c.Consumers.AckWait.D() < 100*time.Millisecond) {
		return &FieldError{"consumers.ack_wait", "must be 0 (service default) or at least 100ms"}
	}
	if c.Storage.Partitions < 0 || c.Storage.Partitions > MaxPartitions {
		return &FieldError{"storage.partitions", fmt.Sprintf("must be between 0 (one partition) and %d", MaxPartitions)}
	}
	switch c.Storage.Replicas {
	case 0:
		c.Storage.Replicas = 1
	case 1, 3, 5:
	default:
		return &FieldError{"storage.replicas", "must be 1, 3 or 5"}
	}
	return c.normalizeMCPServe()
}

func validatePrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if err := contracts.ValidateID("prefix token", tok); err != nil {
			return err
		}
	}
	return nil
}

// intSetting is a whole-number setting: unset (0) takes its default, and a value outside
// [min, max] is refused with problem.
type intSetting struct {
	field    string
	value    *int
	def      int
	min, max int
	problem  string
}

func (f intSetting) apply() error {
	if *f.value == 0 {
		*f.value = f.def
	}
	if *f.value < f.min || *f.value > f.max {
		return &FieldError{f.field, f.problem}
	}
	return nil
}
