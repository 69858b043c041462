package sandboxexec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/sandbox"
	sandboxexec "github.com/awaken-dev/awaken/services/sandbox-exec"
)

// TestArgumentsBreakingTheSchemaNeverEnterTheModule calls wc, whose configuration
// declares `text` as a required string, with arguments that break that schema: each call
// completes as a model-visible error naming the field, the engine is never invoked and the
// body-run ledger records no start.
func TestArgumentsBreakingTheSchemaNeverEnterTheModule(t *testing.T) {
	cfg := strings.Replace(sandboxConfig(true, "wc.wasm"), "    timeout: 5s\n", `    timeout: 5s
    parameters:
      type: object
      properties: { text: { type: string } }
      required: [text]
      additionalProperties: false
`, 1)
	e := exectest.New(t, cfg)
	eng := &fakeEngine{invoke: func(sandbox.Request) (sandbox.Result, error) {
		return sandbox.Result{Stdout: []byte("ran")}, nil
	}}
	s, err := sandboxexec.StartWithEngine(e.Ctx, e.Env, eng, exectest.FastRetries()...)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	tests := []struct{ args, want string }{
		{`{"text":5}`, "invalid tool arguments: /text: "},
		{`{}`, "invalid tool arguments: (arguments): "},
		{`null`, "invalid tool arguments: (arguments): "},
		{`{"text":"a","extra":1}`, "invalid tool arguments: "},
	}
	for i, tt := range tests {
		c := wcCall(fmt.Sprintf("call_%d", i), tt.args)
		e.Allow(c)
		got, isErr := exectest.Text(t, e.WaitTerminal(c))
		if !isErr || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: output %q (error %v), want an error starting %q", tt.args, got, isErr, tt.want)
		}
		if n := e.Ledger(c); n != 0 {
			t.Errorf("%s: ledger = %d, want 0 (the body was entered)", tt.args, n)
		}
	}
	eng.mu.Lock()
	entered := len(eng.args)
	eng.mu.Unlock()
	if entered != 0 {
		t.Errorf("the engine ran %d calls, want none", entered)
	}
	// A valid call still runs.
	c := wcCall("call_ok", `{"text":"a b"}`)
	e.Allow(c)
	if got, isErr := exectest.Text(t, e.WaitTerminal(c)); isErr || got != "ran" {
		t.Errorf("valid call: output %q (error %v)", got, isErr)
	}
}
