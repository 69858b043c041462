package execcore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// reconciling is a scripted Invoker whose tool "tool" also has a reconcile function: it
// counts the body runs (the scripted invocations) and records what each reconcile call
// was given.
type reconciling struct {
	scripted
	answer func(ctx context.Context, call int) (contracts.Reconciled, error)

	mu    sync.Mutex
	asked []execcore.Invocation
	keys  []string
}

func (r *reconciling) Reconciles(toolID string) bool { return toolID == "tool" }

func (r *reconciling) Reconcile(ctx context.Context, inv execcore.Invocation) (contracts.Reconciled, error) {
	r.mu.Lock()
	r.asked = append(r.asked, inv)
	r.keys = append(r.keys, tool.IdempotencyKey(ctx))
	n := len(r.asked)
	r.mu.Unlock()
	return r.answer(ctx, n)
}

func (r *reconciling) calls() ([]execcore.Invocation, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked), slices.Clone(r.keys)
}

// reconcileAudits returns the reconcile audit records of run the audit stream holds, with
// their ce-ids.
func reconcileAudits(t *testing.T, e *exectest.Env, runID string) ([]contracts.ReconcileAudit, []string) {
	t.Helper()
	cons, err := e.JS.OrderedConsumer(e.Ctx, e.Names.AuditStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{e.Names.ReconcileAuditSubject(runID)},
	})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	info, err := cons.Info(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []contracts.ReconcileAudit
	var ids []string
	for left := info.NumPending; left > 0; left-- {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
		if err != nil || ev.Type != contracts.TypeReconcileAudit {
			t.Fatalf("audit message %+v: %v", ev, err)
		}
		var a contracts.ReconcileAudit
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			t.Fatal(err)
		}
		out, ids = append(out, a), append(ids, ev.ID)
	}
	return out, ids
}

// waitReconcileAudits waits until run has n reconcile audit records.
func waitReconcileAudits(t *testing.T, e *exectest.Env, runID string, n int) ([]contracts.ReconcileAudit, []string) {
	t.Helper()
	var out []contracts.ReconcileAudit
	var ids []string
	natstest.WaitFor(t, exectest.Wait, func() bool {
		out, ids = reconcileAudits(t, e, runID)
		return len(out) >= n
	}, "reconcile audit records")
	return out, ids
}

// fastReconcile keeps a test's reconcile attempts short.
var fastReconcile = execcore.WithReconcile(execcore.ReconcileOptions{
	Attempts: 3, Backoff: 5 * time.Millisecond, Timeout: 300 * time.Millisecond, Bound: 20 * time.Second,
})

// TestReconcileAfterCrashInTool: a never_replay call's handler dies after its body ran
// (the in-tool fault: entered, never completed); on the redelivery the executor asks the
// tool's reconcile function instead of sealing the call indeterminate, and commits what it
// answers. Against the code before the reconcile hook every case ended Indeterminate
// ("owner lease expired after the executor was entered") with no reconcile asked.
func TestReconcileAfterCrashInTool(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	tests := []struct {
		name        string
		policy      contracts.ToolRecoveryPolicy
		answer      func(ctx context.Context, call int) (contracts.Reconciled, error)
		wantText    string // Completed output text; "" wants Indeterminate
		wantError   bool
		wantReason  string
		wantRuns    int // body runs, counted by the tool
		wantCalls   int // reconcile calls
		wantOutcome contracts.ReconcileOutcome
		wantFailure string // in the audit's error: the last failure, kept beside a later answer
		wantStages  []string
	}{
		{
			name: "ran completes with the reconciled output, no second run", policy: neverReplay,
			answer: func(context.Context, int) (contracts.Reconciled, error) {
				return contracts.Ran(contracts.TextOutput("", "charged (found by reconcile)")), nil
			},
			wantText: "charged (found by reconcile)", wantRuns: 1, wantCalls: 1, wantOutcome: contracts.ReconcileRan,
			wantStages: []string{"entered", "reconciling", "reconciled", "completed"},
		},
		{
			name: "not_run with attempts left runs the body again", policy: neverReplay,
			answer:   func(context.Context, int) (contracts.Reconciled, error) { return contracts.NotRun(), nil },
			wantText: "ok", wantRuns: 2, wantCalls: 1, wantOutcome: contracts.ReconcileNotRun,
			wantStages: []string{"entered", "reconciling", "reconciled", "recovered", "completed"},
		},
		{
			name:     "not_run without an attempt left completes with did not run",
			policy:   contracts.ToolRecoveryPolicy{Mode: contracts.ModeNeverReplay, MaxAttempts: 1},
			answer:   func(context.Context, int) (contracts.Reconciled, error) { return contracts.NotRun(), nil },
			wantText: "tool execution failed: " + execcore.DidNotRunText, wantError: true, wantRuns: 1, wantCalls: 1,
			wantOutcome: contracts.ReconcileNotRun, wantStages: []string{"entered", "reconciling", "reconciled", "completed"},
		},
		{
			name: "unknown on every attempt leaves it indeterminate", policy: neverReplay,
			answer:     func(context.Context, int) (contracts.Reconciled, error) { return contracts.Unknown(), nil },
			wantReason: execcore.ReasonReconcileUnknown, wantRuns: 1, wantCalls: 3, wantOutcome: contracts.ReconcileUnknown,
			wantStages: []string{"entered", "reconciling", "reconciled", "indeterminate"},
		},
		{
			name: "an error then ran: retried with back-off", policy: neverReplay,
			answer: func(_ context.Context, n int) (contracts.Reconciled, error) {
				if n == 1 {
					return contracts.Reconciled{}, errors.New("status API unavailable")
				}
				return contracts.Ran(contracts.TextOutput("", "done")), nil
			},
			wantText: "done", wantRuns: 1, wantCalls: 2, wantOutcome: contracts.ReconcileRan,
			wantFailure: "status API unavailable",
			wantStages:  []string{"entered", "reconciling", "reconciled", "completed"},
		},
		{
			name: "a panicking reconcile counts as unknown", policy: neverReplay,
			answer:     func(context.Context, int) (contracts.Reconciled, error) { panic("status lookup exploded") },
			wantReason: execcore.ReasonReconcileUnknown, wantRuns: 1, wantCalls: 3, wantOutcome: contracts.ReconcileUnknown,
			wantFailure: "reconcile panicked: status lookup exploded",
			wantStages:  []string{"entered", "reconciling", "reconciled", "indeterminate"},
		},
		{
			// It ignores its context: the executor abandons it at the timeout.
			name: "a reconcile that times out counts as unknown", policy: neverReplay,
			answer: func(context.Context, int) (contracts.Reconciled, error) {
				<-block
				return contracts.Ran(contracts.TextOutput("", "too late")), nil
			},
			wantReason: execcore.ReasonReconcileUnknown, wantRuns: 1, wantCalls: 3, wantOutcome: contracts.ReconcileUnknown,
			wantFailure: "reconcile timed out",
			wantStages:  []string{"entered", "reconciling", "reconciled", "indeterminate"},
		},
		{
			name: "ran with an invalid output counts as unknown", policy: neverReplay,
			answer: func(context.Context, int) (contracts.Reconciled, error) {
				return contracts.Ran(contracts.ToolOutput{Content: []contracts.ContentBlock{{Type: "no-such-block"}}}), nil
			},
			wantReason: execcore.ReasonReconcileUnknown, wantRuns: 1, wantCalls: 3, wantOutcome: contracts.ReconcileUnknown,
			wantFailure: "reconcile answer invalid",
			wantStages:  []string{"entered", "reconciling", "reconciled", "indeterminate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, testConfig)
			var hits exectest.Counter
			e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, &hits))
			tool := &reconciling{scripted: scripted{body: text("ok")}, answer: tt.answer}
			start(t, e, tool, fastReconcile)
			c := call("call_1", "tool", tt.policy)
			c.Args = `{"amount":5}`
			e.Allow(c)

			rec := e.WaitTerminal(c)
			if tt.wantText != "" {
				got, isErr := exectest.Text(t, rec)
				if rec.Phase.Kind != contracts.PhaseCompleted || got != tt.wantText || isErr != tt.wantError {
					t.Fatalf("phase %s %q output %q (error %v), want Completed %q (error %v)",
						rec.Phase.Kind, rec.Phase.Reason, got, isErr, tt.wantText, tt.wantError)
				}
				checkOneOutput(t, e, c, contracts.OutcomeCompleted)
			} else {
				if rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != tt.wantReason {
					t.Fatalf("phase %s reason %q, want Indeterminate %q", rec.Phase.Kind, rec.Phase.Reason, tt.wantReason)
				}
				checkOneOutput(t, e, c, contracts.OutcomeIndeterminate)
			}
			if got := exectest.Stages(rec); !slices.Equal(got, tt.wantStages) {
				t.Errorf("timeline %v, want %v", got, tt.wantStages)
			}
			if runs := len(tool.invocations()); runs != tt.wantRuns {
				t.Errorf("body runs = %d, want %d", runs, tt.wantRuns)
			}
			if n := e.Ledger(c); n != uint64(tt.wantRuns) {
				t.Errorf("ledger = %d, want %d", n, tt.wantRuns)
			}
			asked, keys := tool.calls()
			if len(asked) != tt.wantCalls {
				t.Fatalf("reconcile calls = %d, want %d", len(asked), tt.wantCalls)
			}
			for i, inv := range asked {
				if string(inv.Arguments) != `{"amount":5}` || inv.OperationID != c.Op() || keys[i] != contracts.IdempotencyKey(c.Op()) {
					t.Errorf("reconcile call %d: arguments %s op %q key %q, want the call's arguments and key %q",
						i, inv.Arguments, inv.OperationID, keys[i], contracts.IdempotencyKey(c.Op()))
				}
			}
			if len(rec.Reconciles) != 1 {
				t.Fatalf("reconciles %+v, want one", rec.Reconciles)
			}
			a := rec.Reconciles[0]
			if a.Outcome != tt.wantOutcome || a.Calls != tt.wantCalls || a.Attempt != 1 || a.EndedAt == nil || a.By != rec.EnteredBy {
				t.Errorf("reconcile audit %+v, want outcome %s after %d calls of attempt 1 by %d", a, tt.wantOutcome, tt.wantCalls, rec.EnteredBy)
			}
			if !strings.Contains(a.Error, tt.wantFailure) || tt.wantFailure == "" && a.Error != "" {
				t.Errorf("reconcile audit error %q, want %q", a.Error, tt.wantFailure)
			}
			wantPhase := rec.Phase.Kind
			if tt.wantRuns == 2 {
				wantPhase = contracts.PhaseExecuting // not_run: the body ran again as attempt 2
			}
			if a.Phase != wantPhase {
				t.Errorf("reconcile led to phase %s, want %s", a.Phase, wantPhase)
			}
			audits, ids := waitReconcileAudits(t, e, c.RunID, 1)
			if len(audits) != 1 || ids[0] != execcore.ReconcileAuditID(c.Op(), 1) {
				t.Fatalf("audit records %+v ids %q, want one, %s", audits, ids, execcore.ReconcileAuditID(c.Op(), 1))
			}
			if au := audits[0]; au.CallID != c.CallID || au.ToolID != "tool" || au.Outcome != tt.wantOutcome || au.Phase != wantPhase ||
				au.Calls != tt.wantCalls || au.Error != a.Error || au.Attempt != 1 || au.BatchID != contracts.BatchID(c.RunID, c.Step) {
				t.Errorf("audit record %+v, want the call record's reconcile %+v", au, a)
			}
		})
	}
}

// TestNoReconcileWithoutAFunction: a tool the reconciler does not reconcile (and a
// replayable policy) recovers as before.
func TestNoReconcileWithoutAFunction(t *testing.T) {
	e := exectest.New(t, testConfig)
	e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
	tool := &reconciling{scripted: scripted{body: text("ok")}, answer: func(context.Context, int) (contracts.Reconciled, error) {
		return contracts.NotRun(), nil
	}}
	start(t, e, tool, fastReconcile)
	c := call("call_1", "long", neverReplay)
	e.Allow(c)
	rec := e.WaitTerminal(c)
	if rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != execcore.ReasonOwnerLeaseExpired || len(rec.Reconciles) != 0 {
		t.Fatalf("phase %s %q reconciles %+v, want Indeterminate %q and no reconcile", rec.Phase.Kind, rec.Phase.Reason, rec.Reconciles, execcore.ReasonOwnerLeaseExpired)
	}
	if asked, _ := tool.calls(); len(asked) != 0 {
		t.Errorf("reconcile asked %d times for a tool without one", len(asked))
	}
}

// TestCrashWhileReconciling: the executor dies again after the reconcile answered and
// before it committed (the in-reconcile fault). The redelivery finds the reconcile in
// progress and, within the bound, asks again and commits; a delivery that finds it begun
// longer ago than the bound seals the call indeterminate without asking — so the barrier,
// which waits while the call is Executing, publishes it as indeterminate at the bound.
func TestCrashWhileReconciling(t *testing.T) {
	t.Run("within the bound the redelivery reconciles", func(t *testing.T) {
		e := exectest.New(t, testConfig)
		inTool, inReconcile := exectest.FailTimes(pipeline.FaultInTool, 1, nil), exectest.FailTimes(pipeline.FaultInReconcile, 1, nil)
		e.SetFault(func(ctx context.Context, s string, p pipeline.FaultPoint, op string) error {
			return errors.Join(inTool(ctx, s, p, op), inReconcile(ctx, s, p, op))
		})
		tool := &reconciling{scripted: scripted{body: text("ok")}, answer: func(context.Context, int) (contracts.Reconciled, error) {
			return contracts.Ran(contracts.TextOutput("", "found")), nil
		}}
		start(t, e, tool, fastReconcile)
		c := call("call_1", "tool", neverReplay)
		e.Allow(c)
		rec := e.WaitTerminal(c)
		if got, _ := exectest.Text(t, rec); rec.Phase.Kind != contracts.PhaseCompleted || got != "found" {
			t.Fatalf("phase %s %q output %q, want Completed \"found\"", rec.Phase.Kind, rec.Phase.Reason, got)
		}
		if asked, _ := tool.calls(); len(asked) != 2 || len(rec.Reconciles) != 1 || len(tool.invocations()) != 1 {
			t.Errorf("reconcile asked %d times (want 2: before and after the crash), reconciles %+v (want one), body runs %d (want 1)",
				len(asked), rec.Reconciles, len(tool.invocations()))
		}
	})
	t.Run("past the bound the call is sealed indeterminate", func(t *testing.T) {
		e := exectest.New(t, testConfig)
		inTool := exectest.FailTimes(pipeline.FaultInTool, 1, nil)
		alwaysInReconcile := exectest.FailTimes(pipeline.FaultInReconcile, -1, nil)
		e.SetFault(func(ctx context.Context, s string, p pipeline.FaultPoint, op string) error {
			return errors.Join(inTool(ctx, s, p, op), alwaysInReconcile(ctx, s, p, op))
		})
		tool := &reconciling{scripted: scripted{body: text("ok")}, answer: func(context.Context, int) (contracts.Reconciled, error) {
			return contracts.Ran(contracts.TextOutput("", "found")), nil
		}}
		const bound = 400 * time.Millisecond
		start(t, e, tool, execcore.WithReconcile(execcore.ReconcileOptions{Attempts: 1, Timeout: 100 * time.Millisecond, Bound: bound}),
			execcore.WithDelivery(bus.WithDelivery(1000)), execcore.WithDelivery(bus.WithDelivery(0, 50*time.Millisecond)))
		c := call("call_1", "tool", neverReplay)
		e.Allow(c)
		rec := e.WaitTerminal(c)
		if rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != execcore.ReasonReconcileBound {
			t.Fatalf("phase %s %q, want Indeterminate %q", rec.Phase.Kind, rec.Phase.Reason, execcore.ReasonReconcileBound)
		}
		if len(rec.Reconciles) != 1 || rec.Reconciles[0].Outcome != contracts.ReconcileUnknown || rec.Reconciles[0].EndedAt.Sub(rec.Reconciles[0].StartedAt) < bound {
			t.Errorf("reconciles %+v, want one, unknown, ended past the bound", rec.Reconciles)
		}
		if asked, _ := tool.calls(); len(asked) < 2 {
			t.Errorf("reconcile asked %d times, want one per delivery within the bound (several)", len(asked))
		}
		checkOneOutput(t, e, c, contracts.OutcomeIndeterminate)
	})
}

// TestTwoDeliveriesReconcileOnce: two executors handle the same redelivered request at
// once (a replica that got it after the first one's heartbeat was lost), both find the
// reconcile in progress and both are told not_run. Only one may commit — it moves the
// call to attempt 2 and runs the body — and the other finds the record moved and runs
// nothing: the body runs twice in all (the crashed run and one rerun), never three times.
func TestTwoDeliveriesReconcileOnce(t *testing.T) {
	e := exectest.New(t, testConfig)
	e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
	var asked sync.WaitGroup
	asked.Add(2)
	tool := &reconciling{scripted: scripted{body: text("ok")}, answer: func(ctx context.Context, _ int) (contracts.Reconciled, error) {
		asked.Done()
		asked.Wait() // both deliveries reconcile before either commits
		return contracts.NotRun(), nil
	}}
	opts := execcore.Options{Service: "brain-exec", Target: contracts.TargetBrain, Durable: contracts.ConsumerBrainExec,
		Invoker: tool, Ledger: execcore.KVLedger{KV: e.Counters}, DefaultTimeout: 10 * time.Second,
		Reconcile: execcore.ReconcileOptions{Attempts: 1, Timeout: 10 * time.Second}}
	replicas := make([]*execcore.Executor, 2)
	for i := range replicas {
		x, err := execcore.New(e.Env, opts)
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = x
	}
	c := call("call_1", "tool", neverReplay)
	delivery := requestDelivery(t, e, c)
	if err := replicas[0].Handle(e.Ctx, delivery(1)); !errors.Is(err, exectest.ErrInjected) {
		t.Fatalf("first delivery: %v, want the injected crash", err)
	}
	errs := make(chan error, 2)
	for _, x := range replicas {
		go func() { errs <- x.Handle(e.Ctx, delivery(2)) }()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Errorf("redelivery: %v", err)
		}
	}
	rec := e.Record(c)
	if got, _ := exectest.Text(t, rec); rec.Phase.Kind != contracts.PhaseCompleted || got != "ok" {
		t.Fatalf("phase %s output %q, want Completed ok", rec.Phase.Kind, got)
	}
	if runs := len(tool.invocations()); runs != 2 || e.Ledger(c) != 2 {
		t.Errorf("body runs %d (ledger %d), want 2: the crashed run and one rerun", runs, e.Ledger(c))
	}
	if len(rec.Reconciles) != 1 || rec.Reconciles[0].Outcome != contracts.ReconcileNotRun {
		t.Errorf("reconciles %+v, want one not_run", rec.Reconciles)
	}
}

// requestDelivery allows c and returns a function building the n-th delivery of its
// executor request (the gate's revision of its record), for driving Executor.Handle.
func requestDelivery(t *testing.T, e *exectest.Env, c exectest.Call) func(n uint64) bus.Delivery {
	t.Helper()
	seq := e.Allow(c)
	raw, err := e.JS.Stream(e.Ctx, e.Names.CallRecordsStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := raw.GetMsg(e.Ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return func(n uint64) bus.Delivery {
		return bus.Delivery{Event: ev, Subject: m.Subject, StreamSeq: seq, NumDelivered: n}
	}
}

// TestReconcileInterruptedByShutdown: the executor stops (its context ends) while the
// reconcile runs. That is no answer: the call stays Executing with its reconcile in
// progress, and the next delivery asks again and commits. (The explicit check in
// reconcile is belt and braces: the outcome's write, under the same stopped context,
// fails too — the test passes without the check for that reason.)
func TestReconcileInterruptedByShutdown(t *testing.T) {
	e := exectest.New(t, testConfig)
	e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
	tool := &reconciling{scripted: scripted{body: text("ok")}, answer: func(ctx context.Context, n int) (contracts.Reconciled, error) {
		if n == 1 {
			<-ctx.Done()
			return contracts.Reconciled{}, ctx.Err()
		}
		return contracts.Ran(contracts.TextOutput("", "found")), nil
	}}
	x, err := execcore.New(e.Env, execcore.Options{Service: "brain-exec", Target: contracts.TargetBrain,
		Durable: contracts.ConsumerBrainExec, Invoker: tool, DefaultTimeout: 10 * time.Second,
		Reconcile: execcore.ReconcileOptions{Attempts: 1, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	c := call("call_1", "tool", neverReplay)
	delivery := requestDelivery(t, e, c)
	if err := x.Handle(e.Ctx, delivery(1)); !errors.Is(err, exectest.ErrInjected) {
		t.Fatalf("first delivery: %v, want the injected crash", err)
	}
	stopping, stop := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- x.Handle(stopping, delivery(2)) }()
	natstest.WaitFor(t, exectest.Wait, func() bool { asked, _ := tool.calls(); return len(asked) == 1 }, "the reconcile to be asked")
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted delivery: %v, want context.Canceled", err)
	}
	if rec := e.Record(c); rec.Phase.Kind != contracts.PhaseExecuting || len(rec.Reconciles) != 1 || rec.Reconciles[0].Outcome != "" {
		t.Fatalf("after the interruption: phase %s reconciles %+v, want Executing with the reconcile in progress", rec.Phase.Kind, rec.Reconciles)
	}
	if err := x.Handle(e.Ctx, delivery(3)); err != nil {
		t.Fatalf("third delivery: %v", err)
	}
	rec := e.Record(c)
	if got, _ := exectest.Text(t, rec); rec.Phase.Kind != contracts.PhaseCompleted || got != "found" {
		t.Fatalf("phase %s output %q, want Completed found", rec.Phase.Kind, got)
	}
	if len(tool.invocations()) != 1 {
		t.Errorf("body runs %d, want 1", len(tool.invocations()))
	}
}
