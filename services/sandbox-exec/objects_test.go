package sandboxexec_test

import (
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/pkg/contracts"
	sandboxexec "github.com/awaken-dev/awaken/services/sandbox-exec"
)

// TestLargeSandboxOutputGoesByReference: a module's stdout over the inline limit (1 MiB
// here, four times the default limit) is committed as a resource_link to an object holding
// it, as for a brain tool.
func TestLargeSandboxOutputGoesByReference(t *testing.T) {
	e := exectest.New(t, sandboxConfig(true, "wc.wasm"))
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	eng := &fakeEngine{invoke: func(sandbox.Request) (sandbox.Result, error) { return sandbox.Result{Stdout: []byte(big)}, nil }}
	s, err := sandboxexec.StartWithEngine(e.Ctx, e.Env, eng, exectest.FastRetries()...)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	c := wcCall("call_1", `{}`)
	e.Allow(c)
	rec := e.WaitTerminal(c)
	if rec.Phase.Output == nil || len(rec.Phase.Output.Content) != 1 || rec.Phase.Output.Content[0].Type != contracts.BlockResourceLink {
		t.Fatalf("record %s with output %.200v, want one resource_link", rec.Phase.Kind, rec.Phase.Output)
	}
	l := rec.Phase.Output.Content[0]
	st, err := e.JS.ObjectStore(e.Ctx, e.Names.ObjectsBucket())
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.GetBytes(e.Ctx, l.Name)
	if err != nil || string(data) != big || l.Size != int64(len(big)) {
		t.Errorf("object %s: %d bytes (link says %d), %v; want the module's 1 MiB stdout", l.Name, len(data), l.Size, err)
	}
}
