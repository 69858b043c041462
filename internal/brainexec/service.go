// Package brainexec is the Brain executor's machinery: it runs in-process Go tools for
// executor requests whose trusted target is brain, through the shared executor hop of
// internal/execcore (entry claim, crash recovery by policy, timeout, commit, announce).
// The brain-exec service (services/brain-exec) and the public executor (pkg/executor)
// both run it; it imports no service, so a team's executor links no other part of awaken.
//
// Tools are written against the public vocabulary of pkg/executor/tool — a [tool.Tool],
// or [tool.ToolFunc] for a plain function — and registered in a [toolreg.Registry] (what
// pkg/executor does for a custom Brain executor; see examples/custom-brain). This package
// defines none of those names: it runs what the registry holds.
//
// The host configuration decides which tool ids exist, that they run in the Brain, their
// timeout and their recovery policy. A configured tool's `builtin:` entry (default: its id)
// names the registry implementation that runs it, so one implementation can serve several
// configured tools; the body sees the configured id through [tool.InvocationFrom].
package brainexec

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/internal/brainexec/builtin"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/mcpbridge"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// ServiceName is the service's name: CloudEvent source "awaken/brain-exec", fault-hook name
// and log field.
const ServiceName = contracts.ServiceBrainExec

// Service is a running Brain executor.
type Service struct {
	exec *execcore.Executor
	reg  *toolreg.Registry
	// mcp mounts the configured MCP servers (nil when there are none); unmount removes its
	// tools from reg.
	mcp     *mcpbridge.Bridge
	unmount func()
}

// Start verifies the registry against the configuration (logging a warning that names
// every configured Brain tool without an implementation, and every capability mismatch)
// and starts consuming Brain executor requests on the durable consumer brain-exec, with
// env.Config.Executors.Brain's workers, default timeout and unavailable-retry budget.
// Every body start is recorded in the body-run ledger in env.Counters. opts tune the
// consumer (tests use them to shorten ack waits and back-offs).
//
// The MCP servers of env.Config.Executors.MCP are mounted in reg under [MCPMount]: Start
// connects to them and lists their tools (a server that is down is logged and retried on
// use and in the background, never fatal; a relative command path resolves against the
// configuration file's directory), and every mcp__{server}__{tool} call is routed
// to its server through the same executor path as any other Brain tool. Stop closes the
// sessions and terminates the stdio server processes.
//
// ctx is the hard-stop context; use [Service.Stop] to shut down gracefully.
func Start(ctx context.Context, env *pipeline.Env, reg *toolreg.Registry, opts ...execcore.Option) (*Service, error) {
	if env == nil || env.Config == nil {
		return nil, fmt.Errorf("%s: nil environment or configuration", ServiceName)
	}
	if reg == nil {
		return nil, fmt.Errorf("%s: nil registry", ServiceName)
	}
	checkRegistry(env, reg)
	brain := env.Config.Executors.Brain
	inv := &invoker{cfg: env.Config, reg: reg}
	o := execcore.Options{
		Service:            ServiceName,
		Target:             contracts.TargetBrain,
		Durable:            contracts.ConsumerBrainExec,
		Invoker:            inv,
		Delivery:           []bus.DeliveryOption{bus.WithWorkers(brain.Workers)},
		DefaultTimeout:     brain.DefaultTimeout.D(),
		UnavailableRetries: brain.UnavailableRetries,
	}
	s := &Service{reg: reg}
	if servers := mcpServers(env.Config); len(servers) > 0 {
		s.mcp = mcpbridge.New(servers, env.Log)
		if err := s.mcp.Start(ctx); err != nil {
			return nil, fmt.Errorf("%s: mcp servers: %w", ServiceName, err)
		}
		s.unmount = reg.MountDynamic(MCPMount, mcpTools{s.mcp})
		inv.mcp = s.mcp // the reconcile companions of MCP tools are called through it
		// A tool of an MCP server calls another system on the agent's behalf.
		bridge := s.mcp
		o.ToolType = func(toolID string) string {
			if bridge.Owns(toolID) {
				return telemetry.ToolTypeExtension
			}
			return telemetry.ToolTypeFunction
		}
	}
	x, err := execcore.StartConfigured(ctx, env, o, opts...)
	if err != nil {
		s.closeMCP()
		return nil, err
	}
	s.exec = x
	publishDescriptors(ctx, env, reg)
	return s, nil
}

// Stop stops taking requests and waits, bounded by ctx, for the calls in flight to commit
// and announce their outcomes, then unmounts the MCP servers and closes their sessions.
func (s *Service) Stop(ctx context.Context) error {
	err := s.exec.Stop(ctx)
	s.closeMCP()
	return err
}

// closeMCP unmounts the MCP tools and closes the bridge (idempotent).
func (s *Service) closeMCP() {
	if s.unmount != nil {
		s.unmount()
	}
	if s.mcp != nil {
		_ = s.mcp.Close()
	}
}

// Registry returns the registry the service runs.
func (s *Service) Registry() *toolreg.Registry { return s.reg }

// NewInvoker returns the Invoker brain-exec uses: it resolves a call's configured tool to
// its implementation (`builtin:`, default the tool id) and runs it from reg. A tool that
// is not configured, or whose implementation is missing, fails with "unknown tool: {id}".
// It is exported for custom executors and benchmarks that drive execcore directly.
func NewInvoker(cfg *config.Config, reg *toolreg.Registry) execcore.Invoker {
	return &invoker{cfg: cfg, reg: reg}
}

type invoker struct {
	cfg *config.Config
	reg *toolreg.Registry
	// mcp calls the reconcile companions of MCP tools (nil: no MCP server configured).
	mcp mcpInvoker
}

// Invoke resolves the configured tool to its implementation and runs it.
func (i *invoker) Invoke(ctx context.Context, inv tool.Invocation) (contracts.ToolOutput, error) {
	t, ok := i.cfg.Tool(inv.ToolID)
	if !ok || t.Target != contracts.TargetBrain {
		return contracts.ToolOutput{}, contracts.ErrUnknownTool(inv.ToolID)
	}
	return i.reg.InvokeAs(ctx, implementationOf(t), inv)
}

// MissingImplementations returns, sorted, the configured Brain tools whose implementation
// reg lacks (or holds ambiguously), each as "{tool id}" or "{tool id} (builtin {impl})".
// Calls to them fail with "unknown tool" or as ambiguous.
func MissingImplementations(cfg *config.Config, reg *toolreg.Registry) []string {
	var missing []string
	for _, t := range cfg.Tools {
		if !executesInBrain(t) {
			continue
		}
		impl := implementationOf(t)
		if _, ok := reg.Capability(impl); ok {
			continue
		}
		switch {
		case reg.Has(impl):
			missing = append(missing, fmt.Sprintf("%s (implementation %s is ambiguous)", t.ID, impl))
		case impl != t.ID:
			missing = append(missing, fmt.Sprintf("%s (builtin %s)", t.ID, impl))
		default:
			missing = append(missing, t.ID)
		}
	}
	slices.Sort(missing)
	return missing
}

// checkRegistry logs what would make calls fail or recover unexpectedly: configured Brain
// tools without an implementation, and implementations whose declared capability differs
// from the configured one.
func checkRegistry(env *pipeline.Env, reg *toolreg.Registry) {
	if missing := MissingImplementations(env.Config, reg); len(missing) > 0 {
		env.Log.Warn().Strs("tools", missing).
			Msgf("configured brain tools without an implementation (calls to them fail with \"unknown tool\"): %s",
				strings.Join(missing, ", "))
	}
	for _, t := range env.Config.Tools {
		if !executesInBrain(t) {
			continue
		}
		impl := implementationOf(t)
		declared, ok := reg.Capability(impl)
		if conf := t.EffectiveCapability(); ok && conf != contracts.CapabilityNonRecoverable && conf != declared {
			env.Log.Warn().Str("tool_id", t.ID).Str("implementation", impl).
				Str("configured", string(conf)).Str("declared", string(declared)).
				Msg("configured recovery capability differs from the implementation's declared capability; the configuration decides recovery")
		}
	}
}

// implementationOf is the registry id that runs configured tool t.
func implementationOf(t config.Tool) string {
	if t.Builtin != "" {
		return t.Builtin
	}
	return t.ID
}

// executesInBrain reports whether calls of t reach brain-exec: brain tools that are not
// executed by the client and not answered by the gate with a fixed result.
func executesInBrain(t config.Tool) bool {
	return t.Target == contracts.TargetBrain && t.Kind != contracts.KindClientExecuted && t.SetResult == nil
}

// Registry returns reg with the example tools of internal/brainexec/builtin registered in
// it when builtins is set, or a new registry of the example tools when reg is nil. The
// example tools need env: the counter tool keeps its counts in the counters bucket.
func Registry(ctx context.Context, env *pipeline.Env, reg *toolreg.Registry, builtins bool) (*toolreg.Registry, error) {
	if reg == nil {
		reg, builtins = toolreg.NewRegistry(), true
	}
	if builtins {
		if err := builtin.Register(ctx, reg, env); err != nil {
			return nil, fmt.Errorf("%s: example tools: %w", ServiceName, err)
		}
	}
	return reg, nil
}
