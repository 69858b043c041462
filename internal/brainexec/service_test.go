package brainexec_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/brainexec"
	"github.com/awaken-dev/awaken/internal/brainexec/builtin"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/toolreg"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

const brainConfig = `
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: counter
  - id: slow
    timeout: 200ms
  - id: fail
  - id: lookup
    capability: replay_safe
    parallel: true
  - id: delegate
    kind: delegation
    parallel_completion: true
  - id: ask_me
    builtin: ran
  - id: later
    builtin: ran
  - id: ghost
    description: configured, but no implementation is registered
  - id: stub
    set_result: { text: "fixed" }
  - id: client_pick
    kind: client_executed
` + brainExecutors

const brainExecutors = `
executors:
  brain:
    default_timeout: 10s
    unavailable_retries: 2
`

// withTools returns the test configuration with extra tool entries.
func withTools(extra string) string {
	return strings.TrimSuffix(brainConfig, brainExecutors) + extra + brainExecutors
}

// startBrain starts brain-exec with the builtin tools plus extra registrations.
func startBrain(t *testing.T, e *exectest.Env, extra func(*toolreg.Registry), opts ...execcore.Option) *brainexec.Service {
	t.Helper()
	reg := toolreg.NewRegistry()
	if err := builtin.Register(e.Ctx, reg, e.Env); err != nil {
		t.Fatal(err)
	}
	if extra != nil {
		extra(reg)
	}
	opts = append(exectest.FastRetries(), opts...)
	s, err := brainexec.Start(e.Ctx, e.Env, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	natstest.StopAtCleanup(t, "brain-exec", 20*time.Second, s.Stop)
	return s
}

func brainCall(id, tool, args string) exectest.Call {
	c := exectest.Call{RunID: "run-7", Step: 3, CallID: id, ToolID: tool, Args: args}
	if tool == "echo" {
		c.Policy = contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 3}
	}
	return c
}

func TestBuiltinToolsThroughBrainExec(t *testing.T) {
	e := exectest.New(t, brainConfig)
	startBrain(t, e, nil)
	tests := []struct {
		name, tool, args string
		want             string
		wantErr          bool
		wantLedger       uint64
	}{
		{"echo", "echo", `{"text":"hi"}`, "hi", false, 1},
		{"counter first", "counter", `{"name":"visits"}`, "1", false, 1},
		{"slow", "slow", `{"ms":5}`, "done", false, 1},
		{"slow past its timeout", "slow", `{"ms":5000}`, "tool execution failed: timed out", true, 1},
		{"lookup", "lookup", `{"ms":5}`, "looked up in 5 ms", false, 1},
		{"fail", "fail", `{"message":"boom"}`, "tool execution failed: boom", true, 1},
		{"delegate", "delegate", `{"task":"research","ms":1}`, "delegated: research", false, 1},
		{"ran as ask_me", "ask_me", `{}`, "ran ask_me", false, 1},
		{"ran as later with arguments", "later", `{"any":["thing"]}`, "ran later", false, 1},
		{"configured without implementation", "ghost", `{}`, "unknown tool: ghost", true, 0},
		{"not configured", "nobody", `{}`, "unknown tool: nobody", true, 0},
		{"invalid arguments never start the body", "echo", `{"text":1}`, "invalid tool arguments: ", true, 0},
		{"unknown argument field", "counter", `{"name":"a","by":2}`, "invalid tool arguments: ", true, 0},
		{"counter name must be key-safe", "counter", `{"name":"a.b"}`, "invalid tool arguments: ", true, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := brainCall("call_"+string(rune('a'+i)), tt.tool, tt.args)
			e.Allow(c)
			got, isErr := exectest.Text(t, e.WaitTerminal(c))
			if isErr != tt.wantErr || !strings.HasPrefix(got, tt.want) || (!strings.HasSuffix(tt.want, ": ") && got != tt.want) {
				t.Errorf("output %q (error %v), want %q (error %v)", got, isErr, tt.want, tt.wantErr)
			}
			if n := e.Ledger(c); n != tt.wantLedger {
				t.Errorf("ledger = %d, want %d", n, tt.wantLedger)
			}
		})
	}
	// The counter is durable: a second call sees the first.
	c := brainCall("call_again", "counter", `{"name":"visits"}`)
	e.Allow(c)
	if got, _ := exectest.Text(t, e.WaitTerminal(c)); got != "2" {
		t.Errorf("second counter call returned %q, want 2", got)
	}
}

// TestCrashInsideBuiltinTool: the handler dies inside the tool after the body ran. The
// never_replay counter is not run again (its counter and ledger stay 1); the replay_safe
// echo runs again and completes (ledger 2).
func TestCrashInsideBuiltinTool(t *testing.T) {
	tests := []struct {
		name, tool, args string
		wantPhase        contracts.PhaseKind
		wantLedger       uint64
	}{
		{"counter is never replayed", "counter", `{"name":"crash"}`, contracts.PhaseIndeterminate, 1},
		{"echo is replayed", "echo", `{"text":"again"}`, contracts.PhaseCompleted, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, brainConfig)
			e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
			startBrain(t, e, nil)
			c := brainCall("call_1", tt.tool, tt.args)
			e.Allow(c)
			rec := e.WaitTerminal(c)
			if rec.Phase.Kind != tt.wantPhase {
				t.Fatalf("phase %s (%q), want %s", rec.Phase.Kind, rec.Phase.Reason, tt.wantPhase)
			}
			if n := e.Ledger(c); n != tt.wantLedger {
				t.Errorf("ledger = %d, want %d", n, tt.wantLedger)
			}
			if tt.tool == "counter" {
				if n, err := execcore.ReadCounter(e.Ctx, e.Counters, builtin.CounterKey("crash")); err != nil || n != 1 {
					t.Errorf("counter = %d (%v), want 1", n, err)
				}
			}
			if outs := e.WaitOutputs(c.RunID, 1); len(outs) != 1 || outs[0].Source != "awaken/brain-exec" {
				t.Errorf("outputs %+v", outs)
			}
		})
	}
}

// TestCustomTypedToolThroughBrainExec: a typed tool registered by the embedding program
// runs, sees its operation id, and has its arguments checked by its own type.
func TestCustomTypedToolThroughBrainExec(t *testing.T) {
	e := exectest.New(t, withTools(`
  - id: whoami
    builtin: whoami_impl
`))
	startBrain(t, e, func(r *toolreg.Registry) {
		must(t, toolreg.Register(r, tool.ToolFunc("whoami_impl", "Says who is calling.", contracts.CapabilityReplaySafe,
			func(ctx context.Context, a struct {
				Prefix string `json:"prefix"`
			}) (string, error) {
				inv, _ := tool.InvocationFrom(ctx)
				return a.Prefix + " " + tool.OperationID(ctx) + " as " + inv.ToolID, nil
			})))
	})
	c := brainCall("call_1", "whoami", `{"prefix":"op"}`)
	e.Allow(c)
	if got, _ := exectest.Text(t, e.WaitTerminal(c)); got != "op tool-batch:run-7:3:call_1 as whoami" {
		t.Errorf("output %q", got)
	}
	bad := brainCall("call_2", "whoami", `{"prefix":"op","extra":true}`)
	e.Allow(bad)
	if got, isErr := exectest.Text(t, e.WaitTerminal(bad)); !isErr || !strings.HasPrefix(got, "invalid tool arguments: ") {
		t.Errorf("output %q error %v", got, isErr)
	}
}

func TestMissingImplementations(t *testing.T) {
	e := exectest.New(t, withTools(`
  - id: renamed
    builtin: nowhere
`))
	reg := toolreg.NewRegistry()
	must(t, builtin.Register(e.Ctx, reg, e.Env))
	got := brainexec.MissingImplementations(e.Config, reg)
	want := []string{"ghost", "renamed (builtin nowhere)"}
	if !slices.Equal(got, want) {
		t.Errorf("missing %q, want %q (stub, client_pick are not executed by brain-exec)", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
