package sandboxexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest/wasmbuild"
	sandboxexec "github.com/awaken-dev/awaken/services/sandbox-exec"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

func sandboxConfig(enabled bool, module string) string {
	return fmt.Sprintf(`
tools:
  - id: wc
    target: sandbox
    module: %s
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
    timeout: 5s
  - id: broken
    target: sandbox
    module: /nonexistent/broken.wasm
  - id: echo
    target: brain
executors:
  brain:
    unavailable_retries: 5 # not the sandbox's: its own below bounds its module loads
  sandbox:
    enabled: %v
    unavailable_retries: 2
`, module, enabled)
}

func stopOnCleanup(t *testing.T, s *sandboxexec.Service) {
	natstest.StopAtCleanup(t, "sandbox-exec", 20*time.Second, s.Stop)
}

func wcCall(id, args string) exectest.Call {
	return exectest.Call{RunID: "run-9", Step: 1, CallID: id, ToolID: "wc", Args: args, Target: contracts.TargetSandbox,
		Policy: contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 3}}
}

func TestDisabledSandboxNeverRunsAnything(t *testing.T) {
	e := exectest.New(t, sandboxConfig(false, "wc.wasm"))
	s, err := sandboxexec.Start(e.Ctx, e.Env, exectest.FastRetries()...)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	if s.Available() {
		t.Fatal("a disabled sandbox reports itself available")
	}
	c := wcCall("call_1", `{"text":"a b"}`)
	e.Allow(c)
	got, isErr := exectest.Text(t, e.WaitTerminal(c))
	if got != "tool execution failed: sandbox executor unavailable for tool wc" || !isErr {
		t.Errorf("output %q (error %v)", got, isErr)
	}
	if n := e.Ledger(c); n != 0 {
		t.Errorf("ledger = %d, want 0: nothing may run", n)
	}
	if outs := e.WaitOutputs(c.RunID, 1); len(outs) != 1 || outs[0].Source != "awaken/sandbox-exec" ||
		outs[0].Payload.Outcome != contracts.OutcomeCompleted {
		t.Errorf("outputs %+v", outs)
	}
}

// fakeEngine is a scripted Engine.
type fakeEngine struct {
	mu      sync.Mutex
	loadErr map[string]error
	loads   map[string]int
	invoke  func(req sandbox.Request) (sandbox.Result, error)
	args    []string
	closed  bool
}

func (f *fakeEngine) Load(_ context.Context, id string, cfg sandbox.ModuleConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loads == nil {
		f.loads = map[string]int{}
	}
	f.loads[id]++
	if cfg.Path == "" {
		return errors.New("no path")
	}
	return f.loadErr[id]
}

func (f *fakeEngine) Invoke(_ context.Context, req sandbox.Request) (sandbox.Result, error) {
	f.mu.Lock()
	f.args = append(f.args, string(req.Args))
	f.mu.Unlock()
	return f.invoke(req)
}

func (f *fakeEngine) Close(context.Context) error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

func TestSandboxOutcomes(t *testing.T) {
	missing := fmt.Errorf("%w: tool %q: open wc.wasm: no such file", sandbox.ErrModuleUnavailable, "wc")
	tests := []struct {
		name       string
		loadErr    error
		invoke     func(sandbox.Request) (sandbox.Result, error)
		args       string
		want       string
		wantErr    bool
		wantLedger uint64
	}{
		{"JSON stdout as text", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{Stdout: []byte(`{"lines":0,"words":2,"bytes":3}` + "\n"), IsJSON: true}, nil
		}, `{"text":"a b"}`, `{"lines":0,"words":2,"bytes":3}`, false, 1},
		{"null arguments arrive as {}", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{Stdout: req.Args}, nil
		}, `null`, `{}`, false, 1},
		{"operation id handed to the module", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{Stdout: []byte(req.OperationID)}, nil
		}, `{}`, "tool-batch:run-9:1:call_1", false, 1},
		{"missing module is unavailable before dispatch", missing, nil, `{}`,
			"tool executor unavailable before dispatch: sandbox: module unavailable: tool \"wc\": open wc.wasm: no such file", true, 0},
		{"module exits non-zero", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{}, &sandbox.ModuleError{Kind: sandbox.KindExit, ToolID: "wc", ExitCode: 2, Detail: "exit status 2", Stderr: "bad input"}
		}, `{}`, `tool execution failed: sandbox: tool "wc": exit status 2: stderr: bad input`, true, 1},
		{"module time limit", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{}, &sandbox.ModuleError{Kind: sandbox.KindTimeout, ToolID: "wc", Detail: "timed out after 5s"}
		}, `{}`, "tool execution failed: timed out", true, 1},
		{"module output too large", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{}, &sandbox.ModuleError{Kind: sandbox.KindOutputTooLarge, ToolID: "wc", Detail: "output exceeds 10 bytes"}
		}, `{}`, `tool execution failed: sandbox: tool "wc": output exceeds 10 bytes`, true, 1},
		{"invalid UTF-8 replaced", nil, func(req sandbox.Request) (sandbox.Result, error) {
			return sandbox.Result{Stdout: []byte("ok\xff")}, nil
		}, `{}`, "ok\uFFFD", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, sandboxConfig(true, "wc.wasm"))
			eng := &fakeEngine{loadErr: map[string]error{"wc": tt.loadErr, "broken": missing}, invoke: tt.invoke}
			s, err := sandboxexec.StartWithEngine(e.Ctx, e.Env, eng, exectest.FastRetries()...)
			if err != nil {
				t.Fatal(err)
			}
			stopOnCleanup(t, s)
			c := wcCall("call_1", tt.args)
			e.Allow(c)
			got, isErr := exectest.Text(t, e.WaitTerminal(c))
			if got != tt.want || isErr != tt.wantErr {
				t.Errorf("output %q (error %v), want %q (error %v)", got, isErr, tt.want, tt.wantErr)
			}
			if n := e.Ledger(c); n != tt.wantLedger {
				t.Errorf("ledger = %d, want %d", n, tt.wantLedger)
			}
			if tt.loadErr != nil {
				eng.mu.Lock()
				loads := eng.loads["wc"]
				eng.mu.Unlock()
				if loads != 4 { // at start, then the first try and two local retries
					t.Errorf("module loads = %d, want 4", loads)
				}
			}
		})
	}
}

func TestSandboxRejectsToolsItDoesNotOwn(t *testing.T) {
	e := exectest.New(t, sandboxConfig(true, "wc.wasm"))
	eng := &fakeEngine{invoke: func(sandbox.Request) (sandbox.Result, error) { return sandbox.Result{Stdout: []byte("ran")}, nil }}
	s, err := sandboxexec.StartWithEngine(e.Ctx, e.Env, eng, exectest.FastRetries()...)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	for i, tool := range []string{"echo", "nobody"} {
		c := wcCall(fmt.Sprintf("call_%d", i), "{}")
		c.ToolID = tool
		e.Allow(c)
		if got, _ := exectest.Text(t, e.WaitTerminal(c)); got != "unknown tool: "+tool {
			t.Errorf("%s: output %q", tool, got)
		}
	}
}

// TestRealWebAssemblyModule runs the wc example module in the wazero engine end to end.
func TestRealWebAssemblyModule(t *testing.T) {
	module, cache := buildModule(t, "wc.wasm", "../../examples/sandbox-tools/wc")
	e := exectest.New(t, sandboxConfig(true, module))
	e.Env.Config.Executors.Sandbox.CacheDir = cache.Dir
	s, err := sandboxexec.Start(e.Ctx, e.Env, exectest.FastRetries()...)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	if !s.Available() {
		t.Fatal("sandbox unavailable")
	}
	tests := []struct {
		name, args, want string
		wantErr          bool
	}{
		{"counts", `{"text":"one two\nthree\n"}`, `{"lines":2,"words":3,"bytes":14}`, false},
		{"invalid input fails in the module", `{"txt":"x"}`, "tool execution failed: sandbox: tool \"wc\": exit status 2", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := wcCall(fmt.Sprintf("call_%d", i), tt.args)
			e.Allow(c)
			got, isErr := exectest.Text(t, e.WaitTerminal(c))
			if isErr != tt.wantErr || !strings.HasPrefix(got, tt.want) {
				t.Errorf("output %q (error %v), want %q (error %v)", got, isErr, tt.want, tt.wantErr)
			}
			if n := e.Ledger(c); n != 1 {
				t.Errorf("ledger = %d, want 1", n)
			}
		})
	}
}

// recordingEngine runs calls on a real engine and keeps the stdout of every run, the
// crashed ones included.
type recordingEngine struct {
	sandboxexec.Engine
	mu   sync.Mutex
	outs []string
}

func (r *recordingEngine) Invoke(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	res, err := r.Engine.Invoke(ctx, req)
	r.mu.Lock()
	r.outs = append(r.outs, string(res.Stdout))
	r.mu.Unlock()
	return res, err
}

// TestIdempotencyKeyInTheModuleEnvironment: a real WebAssembly module (the probe test
// module, which reports its environment) finds the call's idempotency key in
// AWAKEN_IDEMPOTENCY_KEY. The executor dies inside its first run; the redelivered request
// runs it again (replay_safe) and the module sees the same key.
func TestIdempotencyKeyInTheModuleEnvironment(t *testing.T) {
	module, cache := buildModule(t, "probe.wasm", "../../internal/sandbox/testdata/probe")
	e := exectest.New(t, fmt.Sprintf(`
tools:
  - id: probe
    target: sandbox
    module: %s
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
    timeout: 10s
executors:
  sandbox:
    enabled: true
`, module))
	e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
	engine, err := sandbox.NewEngine(e.Ctx, sandbox.EngineOptions{CacheDir: cache.Dir})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingEngine{Engine: engine}
	s, err := sandboxexec.StartWithEngine(e.Ctx, e.Env, rec, exectest.FastRetries()...)
	if err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, s)
	c := exectest.Call{RunID: "run-9", Step: 1, CallID: "call_key", ToolID: "probe", Args: `{}`, Target: contracts.TargetSandbox,
		Policy: contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 3}}
	e.Allow(c)
	if r := e.WaitTerminal(c); r.Phase.Kind != contracts.PhaseCompleted {
		t.Fatalf("phase %s (%q)", r.Phase.Kind, r.Phase.Reason)
	}
	want := sandbox.EnvIdempotencyKey + "=" + contracts.IdempotencyKey(c.Op())
	rec.mu.Lock()
	outs := slices.Clone(rec.outs)
	rec.mu.Unlock()
	if len(outs) != 2 {
		t.Fatalf("module ran %d times, want 2 (the crashed run and its replay): %q", len(outs), outs)
	}
	for i, out := range outs {
		var report struct{ Env []string }
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("run %d: %v: %s", i+1, err, out)
		}
		if !slices.Contains(report.Env, want) {
			t.Errorf("run %d: environment %q lacks %s", i+1, report.Env, want)
		}
	}
}

// buildModule builds the Go package pkg for wasip1 into a temporary name and compiles it
// into a module cache outside the race detector (about 1 s instead of 15-30 s under
// -race), closed when the test ends. It skips the test under -short or without the go
// command.
func buildModule(t *testing.T, name, pkg string) (string, *sandboxtest.Cache) {
	t.Helper()
	module := buildWasm(t, name, pkg)
	cache, err := sandboxtest.New(module)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cache.Close(); err != nil {
			t.Error(err)
		}
	})
	return module, cache
}

// buildWasm builds the Go package pkg for wasip1 into a temporary file name and returns
// its path. It skips the test under -short or without the go command.
func buildWasm(t *testing.T, name, pkg string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	module := filepath.Join(t.TempDir(), name)
	if err := wasmbuild.Build(module, pkg); errors.Is(err, exec.ErrNotFound) {
		t.Skip("the go command is needed to build the module")
	} else if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return module
}
