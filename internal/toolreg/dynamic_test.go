package toolreg_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// family is a dynamic tool family owning ids with its prefix; it offers the tools in
// offered (which tests change while the registry is in use) and records its calls.
type family struct {
	prefix string
	mu     sync.Mutex
	tools  []string
	calls  []string
}

func (f *family) offer(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tools = names
}

func (f *family) Owns(id string) bool { return strings.HasPrefix(id, f.prefix) }

func (f *family) Descriptors(context.Context) []contracts.ToolDescriptor {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []contracts.ToolDescriptor
	for _, n := range f.tools {
		out = append(out, contracts.ToolDescriptor{ID: f.prefix + n, Description: "dynamic " + n,
			Parameters: json.RawMessage(`{"type":"object","properties":{}}`), Kind: contracts.KindRegular,
			RecoveryPolicy: contracts.DefaultRecoveryPolicy()})
	}
	return out
}

func (f *family) Invoke(ctx context.Context, id string, args json.RawMessage, inv tool.Invocation) (contracts.ToolOutput, error) {
	f.mu.Lock()
	offered := slices.Contains(f.tools, strings.TrimPrefix(id, f.prefix))
	f.mu.Unlock()
	if !offered {
		return contracts.ToolOutput{}, contracts.ErrUnknownTool(id)
	}
	if err := inv.BeginBody(ctx); err != nil {
		return contracts.ToolOutput{}, err
	}
	f.mu.Lock()
	f.calls = append(f.calls, id+" "+string(args)+" "+inv.OperationID)
	f.mu.Unlock()
	return contracts.TextOutput("", f.prefix+"ran "+strings.TrimPrefix(id, f.prefix)), nil
}

func descriptorIDs(r *toolreg.Registry) []string {
	var ids []string
	for _, d := range r.Descriptors() {
		ids = append(ids, d.ID)
	}
	return ids
}

func TestDynamicTools(t *testing.T) {
	r := toolreg.NewRegistry()
	must(t, toolreg.Register(r, weather{}))
	must(t, toolreg.RegisterRaw(r, contracts.ToolDescriptor{ID: "dyn__static", Description: "Registered statically.",
		Parameters: json.RawMessage(`{"type":"object"}`)}, contracts.CapabilityNonRecoverable,
		func(context.Context, json.RawMessage) (contracts.ToolOutput, error) {
			return contracts.TextOutput("", "static wins"), nil
		}))
	dyn := &family{prefix: "dyn__"}
	unmount := r.MountDynamic("dyn", dyn)

	// A tool the family does not offer yet is unknown; once offered it runs, without any
	// registration, and its descriptor appears.
	if got := outcomeText(invoke(t, r, "dyn__late", `{}`)); got != "unknown tool: dyn__late" {
		t.Fatalf("before it is offered: %q", got)
	}
	dyn.offer("late", "static")
	if got := outcomeText(invoke(t, r, "dyn__late", `null`)); got != "dyn__ran late" {
		t.Fatalf("once offered: %q", got)
	}
	if want := []string{"dyn__late", "dyn__static", "weather"}; !slices.Equal(descriptorIDs(r), want) {
		t.Fatalf("descriptors %v, want %v", descriptorIDs(r), want)
	}
	// A statically registered id takes precedence over the family.
	if got := outcomeText(invoke(t, r, "dyn__static", `{}`)); got != "static wins" {
		t.Fatalf("static id: %q", got)
	}
	// Arguments are checked before the family runs; null means {}.
	if got := outcomeText(invoke(t, r, "dyn__late", `{bad`)); !strings.HasPrefix(got, "invalid tool arguments") {
		t.Fatalf("bad JSON: %q", got)
	}
	if want := []string{"dyn__late {} tool-batch:run-1:1:call_1"}; !slices.Equal(dyn.calls, want) {
		t.Fatalf("family calls %q, want %q", dyn.calls, want)
	}

	// Mounting again under the same name replaces the family; the stale unmount is a no-op.
	other := &family{prefix: "dyn__"}
	other.offer("late")
	unmountOther := r.MountDynamic("dyn", other)
	unmount()
	invoke(t, r, "dyn__late", `{}`)
	if len(other.calls) != 1 || len(dyn.calls) != 1 {
		t.Fatalf("calls after remount: new %d, old %d", len(other.calls), len(dyn.calls))
	}
	unmountOther()
	if got := outcomeText(invoke(t, r, "dyn__late", `{}`)); got != "unknown tool: dyn__late" {
		t.Fatalf("after unmount: %q", got)
	}
	if want := []string{"dyn__static", "weather"}; !slices.Equal(descriptorIDs(r), want) {
		t.Fatalf("descriptors after unmount %v, want %v", descriptorIDs(r), want)
	}
}

// TestDynamicTools_firstOwnerServes: of two families owning an id, the first mounted one
// serves its calls and alone lists it.
func TestDynamicTools_firstOwnerServes(t *testing.T) {
	r := toolreg.NewRegistry()
	a, b := &family{prefix: "x__"}, &family{prefix: "x__"}
	a.offer("t")
	b.offer("t", "u")
	r.MountDynamic("a", a)
	r.MountDynamic("b", b)
	if want := []string{"x__t"}; !slices.Equal(descriptorIDs(r), want) {
		t.Fatalf("descriptors %v, want %v (b's tools are shadowed by a, which owns x__*)", descriptorIDs(r), want)
	}
	invoke(t, r, "x__t", `{}`)
	if len(a.calls) != 1 || len(b.calls) != 0 {
		t.Fatalf("calls: a %d, b %d", len(a.calls), len(b.calls))
	}
}
