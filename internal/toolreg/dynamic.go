package toolreg

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// DynamicTools is a family of Brain tools whose set is only known at run time, such as the
// tools of MCP servers. Its tools are not registered one by one: a call whose
// implementation id is not registered as a typed or raw tool is routed, when it arrives,
// to the first mounted family that owns the id, so a tool that appears after Start (a
// server that came up later) is callable at once; and the registry's descriptors include
// the family's current tools.
//
// Implementations are called concurrently and must be safe for that.
type DynamicTools interface {
	// Owns reports whether id belongs to the family, whether or not the tool exists now
	// (the family answers "unknown tool" itself for an id it owns but does not offer).
	Owns(id string) bool
	// Descriptors lists the family's current tools; ctx bounds any lookup.
	Descriptors(ctx context.Context) []contracts.ToolDescriptor
	// Invoke runs tool id for inv with args, a JSON value ({} when the model sent null or
	// nothing). It must call inv.BeginBody immediately before the effect may start, after
	// every check that can fail without it, and follows the error rules of [tool.Tool]: a
	// *contracts.ToolError is what the model sees, UnavailableBeforeDispatch only with proof
	// that the effect did not start.
	Invoke(ctx context.Context, id string, args json.RawMessage, inv tool.Invocation) (contracts.ToolOutput, error)
}

// mount is one mounted family.
type mount struct {
	name string
	d    DynamicTools
}

// MountDynamic adds the tool family d under name, replacing a family mounted earlier under
// the same name (an executor started again mounts its MCP servers again), and returns a
// function that removes this mount if it is still the one under name. Registered typed and
// raw tools take precedence over every family; families are consulted in mount order. It
// is safe to call while calls run.
func (r *Registry) MountDynamic(name string, d DynamicTools) (unmount func()) {
	m := &mount{name: name, d: d}
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.IndexFunc(r.dynamic, func(x *mount) bool { return x.name == name }); i >= 0 {
		r.dynamic[i] = m
	} else {
		r.dynamic = append(r.dynamic, m)
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.dynamic = slices.DeleteFunc(r.dynamic, func(x *mount) bool { return x == m })
	}
}

// mounts returns a snapshot of the mounted families.
func (r *Registry) mounts() []*mount {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.dynamic)
}

// dynamicFor returns the family owning id, or nil.
func (r *Registry) dynamicFor(id string) DynamicTools {
	for _, m := range r.mounts() {
		if m.d.Owns(id) {
			return m.d
		}
	}
	return nil
}

// invokeDynamic runs id from family d: the arguments are checked as for a raw tool (null or
// empty mean {}, anything else must be valid JSON), then the family runs the call and
// records its body start itself, at the moment the effect may start.
func invokeDynamic(ctx context.Context, d DynamicTools, id string, inv tool.Invocation) (contracts.ToolOutput, error) {
	args := bytes.TrimSpace(inv.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return contracts.ToolOutput{}, contracts.InvalidArguments("arguments are not valid JSON")
	}
	out, err := d.Invoke(ctx, id, json.RawMessage(args), inv)
	if err != nil {
		return contracts.ToolOutput{}, asToolError(err)
	}
	return out, nil
}

// DescriptorsContext returns the descriptor of every unambiguous registered tool and of
// the current tools of every mounted dynamic family, sorted by id; ctx bounds the
// families' lookups. A family's descriptor is listed only if calls to its id would reach
// that family: not registered statically (even ambiguously) and not owned by an earlier
// family.
func (r *Registry) DescriptorsContext(ctx context.Context) []contracts.ToolDescriptor {
	out := r.staticDescriptors()
	r.mu.RLock()
	taken := make(map[string]bool, len(r.tools))
	for id := range r.tools {
		taken[id] = true
	}
	r.mu.RUnlock()
	mounts := r.mounts()
	for i, m := range mounts {
		for _, d := range m.d.Descriptors(ctx) {
			if taken[d.ID] || slices.ContainsFunc(mounts[:i], func(x *mount) bool { return x.d.Owns(d.ID) }) {
				continue
			}
			taken[d.ID] = true
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b contracts.ToolDescriptor) int { return strings.Compare(a.ID, b.ID) })
	return out
}
