// Package toolreg is the Brain tool registry: the typed ([Register]), raw ([RegisterRaw])
// and dynamic ([Registry.MountDynamic]) tool implementations by id, how a call's arguments
// are decoded and checked before its body runs, and how a body's output is rendered. The
// stock brain-exec service invokes through it, and pkg/executor registers its users' tools
// in it; it lives apart from both so that the public SDK does not import service code.
// The vocabulary it registers (Tool, Invocation, …) is pkg/executor/tool's.
package toolreg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// RawFunc is the body of a dynamic tool registered with [RegisterRaw]: it receives the
// arguments as JSON (null or empty arguments arrive as {}) and returns a ToolOutput.
type RawFunc func(ctx context.Context, args json.RawMessage) (contracts.ToolOutput, error)

// ErrDuplicateTool is returned by registration when the id is already registered. The id
// then stays ambiguous: no later registration can claim it, and every call to it fails
// with "tool execution failed: tool id `{id}` is ambiguous", so a wiring mistake can never
// silently pick one of two bodies.
var ErrDuplicateTool = errors.New("tool id registered twice")

// ErrInvalidTool is wrapped by every other registration failure (bad id, capability,
// descriptor or argument type).
var ErrInvalidTool = errors.New("invalid tool registration")

// body is a bound call: arguments decoded, ready to run.
type body func(ctx context.Context) (contracts.ToolOutput, error)

// entry is one registered implementation.
type entry struct {
	desc       contracts.ToolDescriptor
	capability contracts.ToolRecoveryCapability
	// bind decodes the raw arguments; it fails without running anything.
	bind func(args json.RawMessage) (body, error)
	// reconcile binds the tool's reconcile function (nil: the tool has none).
	reconcile reconcileBinder
	ambiguous bool
}

// Registry holds the Brain tool implementations by id. Registration usually happens before
// the executor starts; it is nevertheless safe for concurrent use, so dynamic tools (MCP
// servers) can be added while calls run.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*entry
	// dynamic holds the mounted dynamic tool families, in mount order (see MountDynamic).
	dynamic []*mount
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tools: map[string]*entry{}} }

// Register adds a typed tool. It is the one adapter every typed tool goes through: the
// descriptor is derived from A with contracts.DescriptorFor, and arguments are decoded
// with decodeArguments[A], checked against that descriptor's schema (strict: unknown fields, wrong types and missing
// required fields are "invalid tool arguments: …"; null arguments mean {}).
func Register[A, O any](r *Registry, t tool.Tool[A, O]) error {
	if t == nil {
		return fmt.Errorf("%w: nil tool", ErrInvalidTool)
	}
	id := t.ID()
	capability, err := contracts.ParseRecoveryCapability(string(t.Capability()))
	if err != nil {
		return fmt.Errorf("%w: tool %s: %w", ErrInvalidTool, id, err)
	}
	desc, err := contracts.DescriptorFor[A](id, t.Description())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	return r.add(id, &entry{
		desc:       desc,
		capability: capability,
		reconcile:  bindReconcile(t),
		bind: func(raw json.RawMessage) (body, error) {
			args, err := decodeArguments[A](raw)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) (contracts.ToolOutput, error) {
				v, err := t.Call(ctx, args)
				if err != nil {
					return contracts.ToolOutput{}, asToolError(err)
				}
				return render(v)
			}, nil
		},
	})
}

// RegisterRaw adds a dynamic tool whose descriptor is known only at run time (for example a
// tool of an MCP server). desc is validated; its parameters are normalised to the object
// form. The body gets the raw arguments and is responsible for checking them.
func RegisterRaw(r *Registry, desc contracts.ToolDescriptor, capability contracts.ToolRecoveryCapability, fn RawFunc) error {
	if fn == nil {
		return fmt.Errorf("%w: tool %s: nil function", ErrInvalidTool, desc.ID)
	}
	c, err := contracts.ParseRecoveryCapability(string(capability))
	if err != nil {
		return fmt.Errorf("%w: tool %s: %w", ErrInvalidTool, desc.ID, err)
	}
	if desc.Kind == "" {
		desc.Kind = contracts.KindRegular
	}
	if desc.RecoveryPolicy == (contracts.ToolRecoveryPolicy{}) {
		desc.RecoveryPolicy = contracts.DefaultRecoveryPolicy()
	}
	params, err := contracts.NormalizeParameters(desc.Parameters)
	if err != nil {
		return fmt.Errorf("%w: tool %s: %w", ErrInvalidTool, desc.ID, err)
	}
	desc.Parameters = params
	if err := desc.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	return r.add(desc.ID, &entry{
		desc:       desc,
		capability: c,
		bind: func(raw json.RawMessage) (body, error) {
			args := bytes.TrimSpace(raw)
			if len(args) == 0 || bytes.Equal(args, []byte("null")) {
				args = []byte("{}")
			}
			if !json.Valid(args) {
				return nil, contracts.InvalidArguments("arguments are not valid JSON")
			}
			return func(ctx context.Context) (contracts.ToolOutput, error) {
				out, err := fn(ctx, json.RawMessage(args))
				if err != nil {
					return contracts.ToolOutput{}, asToolError(err)
				}
				return out, nil
			}, nil
		},
	})
}

// add installs e under id, or makes id permanently ambiguous.
func (r *Registry) add(id string, e *entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = map[string]*entry{}
	}
	if prev, ok := r.tools[id]; ok {
		prev.ambiguous = true
		return fmt.Errorf("%w: %s (every call to it will fail as ambiguous)", ErrDuplicateTool, id)
	}
	r.tools[id] = e
	return nil
}

// Descriptors returns the descriptor of every unambiguous tool, sorted by id, including
// the current tools of the mounted dynamic families (see [Registry.DescriptorsContext]).
// The kind and recovery policy are the registry defaults; the host configuration decides
// the pinned policy of real calls.
func (r *Registry) Descriptors() []contracts.ToolDescriptor {
	return r.DescriptorsContext(context.Background())
}

// staticDescriptors returns the descriptors of the registered tools, unsorted.
func (r *Registry) staticDescriptors() []contracts.ToolDescriptor {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]contracts.ToolDescriptor, 0, len(r.tools))
	for _, e := range r.tools {
		if !e.ambiguous {
			d := e.desc
			d.Parameters = slices.Clone(d.Parameters)
			out = append(out, d)
		}
	}
	return out
}

// Capability returns the declared capability of implementation id, false when it is not
// registered or ambiguous.
func (r *Registry) Capability(id string) (contracts.ToolRecoveryCapability, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[id]
	if !ok || e.ambiguous {
		return "", false
	}
	return e.capability, true
}

// Has reports whether implementation id is registered (ambiguous ids included).
func (r *Registry) Has(id string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.tools[id]
	return ok
}

// Invoke runs the tool registered as inv.ToolID for inv. See [Registry.InvokeAs].
func (r *Registry) Invoke(ctx context.Context, inv tool.Invocation) (contracts.ToolOutput, error) {
	return r.InvokeAs(ctx, inv.ToolID, inv)
}

// InvokeAs runs implementation impl for inv (the configured tool inv.ToolID may name
// another implementation). Unknown implementations fail with "unknown tool: {inv.ToolID}",
// ambiguous ones with "tool execution failed: tool id `{impl}` is ambiguous", undecodable
// arguments with "invalid tool arguments: …" — all without running the body. Otherwise
// inv.BeginBody is called (the body-run ledger) and the body runs. An implementation that
// is not registered but owned by a mounted dynamic family is run by that family, looked up
// now (see [DynamicTools]).
func (r *Registry) InvokeAs(ctx context.Context, impl string, inv tool.Invocation) (contracts.ToolOutput, error) {
	r.mu.RLock()
	e, ok := r.tools[impl]
	r.mu.RUnlock()
	if !ok {
		if d := r.dynamicFor(impl); d != nil {
			return invokeDynamic(ctx, d, impl, inv)
		}
	}
	switch {
	case !ok:
		return contracts.ToolOutput{}, contracts.ErrUnknownTool(inv.ToolID)
	case e.ambiguous:
		return contracts.ToolOutput{}, contracts.ExecutionFailed("tool id `" + impl + "` is ambiguous")
	}
	run, err := e.bind(inv.Arguments)
	if err != nil {
		return contracts.ToolOutput{}, err
	}
	if err := inv.BeginBody(ctx); err != nil {
		return contracts.ToolOutput{}, err
	}
	return run(ctx)
}

// render turns a typed tool's value into its output.
func render(v any) (contracts.ToolOutput, error) {
	switch x := v.(type) {
	case string:
		return contracts.TextOutput("", x), nil
	case contracts.ToolOutput:
		return x, nil
	case *contracts.ToolOutput:
		if x == nil {
			return contracts.TextOutput("", ""), nil
		}
		return *x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return contracts.ToolOutput{}, contracts.ExecutionFailed("tool output cannot be rendered as JSON: " + err.Error())
	}
	return contracts.TextOutput("", string(b)), nil
}

// asToolError keeps a *contracts.ToolError in err's chain and turns anything else into an
// execution failure carrying err's text.
func asToolError(err error) error {
	var te *contracts.ToolError
	if errors.As(err, &te) {
		return te
	}
	return contracts.ExecutionFailed(err.Error())
}
