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

const testConfig = `
tools:
  - id: tool
  - id: replayable
    capability: replay_safe
  - id: idempotent
    capability: idempotent
  - id: durable
    capability: durable_request
  - id: long
    timeout: 1m
  - id: quick
    timeout: 150ms
executors:
  brain:
    default_timeout: 10s
`

var (
	neverReplay = contracts.DefaultRecoveryPolicy()
	replaySafe  = contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 3}
)

// body is a scripted tool body.
type body func(ctx context.Context, inv execcore.Invocation) (contracts.ToolOutput, error)

// scripted is an Invoker that records every invocation, starts the body-run ledger like a
// real adapter, and runs the body.
type scripted struct {
	body body
	mu   sync.Mutex
	seen []execcore.Invocation
}

func (s *scripted) Invoke(ctx context.Context, inv execcore.Invocation) (contracts.ToolOutput, error) {
	s.mu.Lock()
	s.seen = append(s.seen, inv)
	s.mu.Unlock()
	if err := inv.BeginBody(ctx); err != nil {
		return contracts.ToolOutput{}, err
	}
	return s.body(ctx, inv)
}

func (s *scripted) invocations() []execcore.Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func text(s string) body {
	return func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
		return contracts.TextOutput("", s), nil
	}
}

// start runs an executor with short back-offs on e.
func start(t *testing.T, e *exectest.Env, inv execcore.Invoker, opts ...execcore.Option) *execcore.Executor {
	t.Helper()
	o := execcore.Options{
		Service: "brain-exec", Target: contracts.TargetBrain, Durable: contracts.ConsumerBrainExec,
		Invoker: inv, Ledger: execcore.KVLedger{KV: e.Counters},
		DefaultTimeout: 10 * time.Second, UnavailableRetries: 2,
		RetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond,
		Delivery: []bus.DeliveryOption{bus.WithDelivery(0, 20*time.Millisecond), bus.WithAckWait(5 * time.Second)},
	}
	for _, opt := range opts {
		opt(&o)
	}
	x, err := execcore.Start(e.Ctx, e.Env, o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	natstest.StopAtCleanup(t, "executor", 20*time.Second, x.Stop)
	return x
}

func call(id, tool string, policy contracts.ToolRecoveryPolicy) exectest.Call {
	return exectest.Call{RunID: "run-1", Step: 3, CallID: id, ToolID: tool, Policy: policy}
}

// checkOneOutput asserts that run has exactly one CallOutput, for c, with outcome.
func checkOneOutput(t *testing.T, e *exectest.Env, c exectest.Call, outcome contracts.Outcome) {
	t.Helper()
	outs := e.WaitOutputs(c.RunID, 1)
	if len(outs) != 1 {
		t.Fatalf("call outputs = %d, want exactly 1: %+v", len(outs), outs)
	}
	o := outs[0]
	if o.ID != pipeline.OutputID(c.Op()) || o.Source != "awaken/brain-exec" {
		t.Errorf("output id %q source %q, want %q awaken/brain-exec", o.ID, o.Source, pipeline.OutputID(c.Op()))
	}
	if o.Payload.CallID != c.CallID || o.Payload.Outcome != outcome || o.Payload.ToolID != c.ToolID || o.Payload.Step != c.Step {
		t.Errorf("output payload %+v, want call %s outcome %s", o.Payload, c.CallID, outcome)
	}
}

// checkEnded asserts that c ended with one CallOutput of outcome after its body ran runs
// times, as the ledger counts them.
func checkEnded(t *testing.T, e *exectest.Env, c exectest.Call, outcome contracts.Outcome, runs uint64) {
	t.Helper()
	checkOneOutput(t, e, c, outcome)
	if n := e.Ledger(c); n != runs {
		t.Errorf("ledger = %d, want %d", n, runs)
	}
}

func TestNormalCallRunsOnceAndCompletes(t *testing.T) {
	e := exectest.New(t, testConfig)
	inv := &scripted{body: text("hello")}
	start(t, e, inv)
	c := call("call_1", "tool", neverReplay)
	c.Args = `{"x":1}`
	seq := e.Allow(c)

	rec := e.WaitTerminal(c)
	if got, isErr := exectest.Text(t, rec); got != "hello" || isErr {
		t.Fatalf("output %q (error %v), want hello", got, isErr)
	}
	if rec.Phase.Output.CallID != "call_1" {
		t.Errorf("output call id %q, want call_1", rec.Phase.Output.CallID)
	}
	if !rec.Entered || rec.EnteredBy != seq {
		t.Errorf("entered %v by %d, want true by %d", rec.Entered, rec.EnteredBy, seq)
	}
	if got := exectest.Stages(rec); !slices.Equal(got, []string{contracts.StageEntered, contracts.StageCompleted}) {
		t.Errorf("timeline %v", got)
	}
	checkEnded(t, e, c, contracts.OutcomeCompleted, 1)
	invs := inv.invocations()
	if len(invs) != 1 || invs[0].Attempt != 1 || invs[0].OperationID != c.Op() || string(invs[0].Arguments) != `{"x":1}` {
		t.Errorf("invocations %+v", invs)
	}
}

// TestReplaySafeCallCompletesInOneWrite: a replay_safe call (with a budget for a replay)
// runs its first attempt without committing Entered, so Completed is the executor's only
// write; any other mode is entered first (TestNormalCallRunsOnceAndCompletes).
func TestReplaySafeCallCompletesInOneWrite(t *testing.T) {
	e := exectest.New(t, testConfig)
	inv := &scripted{body: text("hello")}
	start(t, e, inv)
	c := call("call_1", toolOfMode[replaySafe.Mode], replaySafe)
	e.Allow(c)
	rec := e.WaitTerminal(c)
	if got, _ := exectest.Text(t, rec); got != "hello" {
		t.Fatalf("output %q", got)
	}
	if rec.Entered {
		t.Errorf("entered by %d, want no Entered write", rec.EnteredBy)
	}
	if got := exectest.Stages(rec); !slices.Equal(got, []string{contracts.StageCompleted}) {
		t.Errorf("timeline %v, want only completed", got)
	}
	checkOneOutput(t, e, c, contracts.OutcomeCompleted)
	if invs := inv.invocations(); len(invs) != 1 || invs[0].Attempt != 1 {
		t.Errorf("invocations %+v, want one, attempt 1", invs)
	}
}

// TestRedeliveryAfterCrashInTool: the handler dies inside the tool (fault), the same
// message is redelivered while the record is Executing+Entered by it, and recovery follows
// the pinned policy.
func TestRedeliveryAfterCrashInTool(t *testing.T) {
	tests := []struct {
		name       string
		policy     contracts.ToolRecoveryPolicy
		faults     int // how many in-tool faults fire
		wantPhase  contracts.PhaseKind
		wantReason string
		wantLedger uint64
		wantStages []string
	}{
		{
			name: "never_replay becomes indeterminate, body ran once", policy: neverReplay, faults: 1,
			wantPhase: contracts.PhaseIndeterminate, wantReason: execcore.ReasonOwnerLeaseExpired, wantLedger: 1,
			wantStages: []string{"entered", "indeterminate"},
		},
		{
			name: "replay_safe is retried as attempt 2 and completes", policy: replaySafe, faults: 1,
			wantPhase: contracts.PhaseCompleted, wantLedger: 2,
			wantStages: []string{"entered", "recovered", "completed"},
		},
		{
			// The first attempt ran without a marker (one write per call); the redelivery
			// counts it all the same, so the budget still bounds the body runs.
			name: "replay_safe exhausts its budget after max_attempts body runs", policy: replaySafe, faults: 3,
			wantPhase: contracts.PhaseIndeterminate, wantReason: execcore.ReasonAttemptsExhausted, wantLedger: 3,
			wantStages: []string{"entered", "recovered", "recovered", "indeterminate"},
		},
		{
			// No budget for a replay: the call is entered before its body, as never_replay.
			name: "replay_safe with max_attempts 1 is entered first and not replayed", faults: 1,
			policy:    contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 1},
			wantPhase: contracts.PhaseIndeterminate, wantReason: execcore.ReasonAttemptsExhausted, wantLedger: 1,
			wantStages: []string{"entered", "indeterminate"},
		},
		{
			name: "idempotent is retried as attempt 2 and completes", faults: 1,
			policy:    contracts.ToolRecoveryPolicy{Mode: contracts.ModeIdempotent, MaxAttempts: 2},
			wantPhase: contracts.PhaseCompleted, wantLedger: 2,
			wantStages: []string{"entered", "recovered", "completed"},
		},
		{
			name: "attempts exhausted becomes indeterminate", faults: 2,
			policy:    contracts.ToolRecoveryPolicy{Mode: contracts.ModeDurableRequest, MaxAttempts: 2},
			wantPhase: contracts.PhaseIndeterminate, wantReason: execcore.ReasonAttemptsExhausted, wantLedger: 2,
			wantStages: []string{"entered", "recovered", "indeterminate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, testConfig)
			var hits exectest.Counter
			e.SetFault(exectest.FailTimes(pipeline.FaultInTool, tt.faults, &hits))
			start(t, e, &scripted{body: text("ok")})
			c := call("call_1", toolOfMode[tt.policy.Mode], tt.policy)
			e.Allow(c)

			rec := e.WaitTerminal(c)
			if rec.Phase.Kind != tt.wantPhase || rec.Phase.Reason != tt.wantReason {
				t.Fatalf("phase %s reason %q, want %s %q", rec.Phase.Kind, rec.Phase.Reason, tt.wantPhase, tt.wantReason)
			}
			if got := exectest.Stages(rec); !slices.Equal(got, tt.wantStages) {
				t.Errorf("timeline %v, want %v", got, tt.wantStages)
			}
			outcome := contracts.OutcomeCompleted
			if tt.wantPhase == contracts.PhaseIndeterminate {
				outcome = contracts.OutcomeIndeterminate
			}
			checkEnded(t, e, c, outcome, tt.wantLedger)
		})
	}
}

// TestDuplicateRequestWhileRunningIsIgnored: a second request message for the call
// arrives while the first runs; it is acknowledged without running anything.
func TestDuplicateRequestWhileRunningIsIgnored(t *testing.T) {
	e := exectest.New(t, testConfig)
	release := make(chan struct{})
	t.Cleanup(func() { closeOnce(release) })
	start(t, e, &scripted{body: func(ctx context.Context, _ execcore.Invocation) (contracts.ToolOutput, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return contracts.ToolOutput{}, ctx.Err()
		}
		return contracts.TextOutput("", "first"), nil
	}})
	c := call("call_1", "tool", neverReplay)
	first := e.Allow(c)
	e.WaitEntered(c)
	dup := e.Publish(c, pipeline.ExecRequestID(c.Op(), 1)+"-again")
	if dup == first {
		t.Fatal("the duplicate was deduplicated by the stream; the test needs a distinct message")
	}
	// The duplicate is settled (acknowledged) while the first still runs.
	natstest.WaitFor(t, exectest.Wait, func() bool {
		c, err := e.JS.Consumer(e.Ctx, e.Names.CallRecordsStream(), contracts.ConsumerBrainExec)
		if err != nil {
			return false
		}
		info, err := c.Info(e.Ctx)
		return err == nil && info.Delivered.Stream >= dup && info.NumAckPending == 1
	}, "the duplicate request to be acknowledged")
	if rec := e.Record(c); rec.Phase.Kind != contracts.PhaseExecuting || rec.EnteredBy != first {
		t.Fatalf("record %s entered by %d, want Executing entered by %d", rec.Phase.Kind, rec.EnteredBy, first)
	}
	closeOnce(release)
	rec := e.WaitTerminal(c)
	if got, _ := exectest.Text(t, rec); got != "first" {
		t.Fatalf("output %q", got)
	}
	e.WaitSettled(contracts.ConsumerBrainExec, dup)
	checkEnded(t, e, c, contracts.OutcomeCompleted, 1)
}

// TestRequestForSettledOrStaleCall: a request whose call is terminal re-publishes the
// output without running the body; one whose call is not executing does nothing.
func TestRequestForSettledOrStaleCall(t *testing.T) {
	done := contracts.TextOutput("call_1", "earlier")
	tests := []struct {
		name        string
		rec         func(contracts.CallRecord) contracts.CallRecord
		wantOutputs int
		wantOutcome contracts.Outcome
	}{
		{"completed re-publishes", func(r contracts.CallRecord) contracts.CallRecord {
			r.Phase, r.Entered = contracts.CompletedPhase(done), true
			return r
		}, 1, contracts.OutcomeCompleted},
		{"indeterminate re-publishes", func(r contracts.CallRecord) contracts.CallRecord {
			r.Phase = contracts.IndeterminatePhase("cancelled")
			return r
		}, 1, contracts.OutcomeIndeterminate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, testConfig)
			inv := &scripted{body: text("must not run")}
			start(t, e, inv)
			c := call("call_1", "tool", replaySafe)
			if tt.rec != nil {
				e.Seed(c, tt.rec(c.Record()))
			}
			seq := e.Publish(c, pipeline.ExecRequestID(c.Op(), 1))
			e.WaitSettled(contracts.ConsumerBrainExec, seq)
			outs := e.Outputs(c.RunID)
			if len(outs) != tt.wantOutputs {
				t.Fatalf("outputs = %d, want %d", len(outs), tt.wantOutputs)
			}
			if tt.wantOutputs == 1 {
				checkOneOutput(t, e, c, tt.wantOutcome)
			}
			if len(inv.invocations()) != 0 || e.Ledger(c) != 0 {
				t.Errorf("the body ran: %d invocations, ledger %d", len(inv.invocations()), e.Ledger(c))
			}
		})
	}
}

// TestRequestAheadOfItsRecordIsRetried: the gate makes a call Executing before it
// publishes its request, so a request whose record reads as missing, Requested or
// Awaiting was read from a replica of the calls bucket that has not applied the gate's
// write yet. It is not acknowledged (that left the call Executing and never run, and its
// batch unpublished, in the 3-node cluster test): it is redelivered, and runs once the
// record shows Executing.
func TestRequestAheadOfItsRecordIsRetried(t *testing.T) {
	tests := []struct {
		name string
		rec  func(contracts.CallRecord) contracts.CallRecord
	}{
		// (A missing record cannot be staged on one node any more: the request is a
		// revision of the record, so the executor's own read finds at least that.)
		{"requested", func(r contracts.CallRecord) contracts.CallRecord {
			r.Phase = contracts.RequestedPhase()
			return r
		}},
		{"awaiting", func(r contracts.CallRecord) contracts.CallRecord {
			r.Phase = contracts.AwaitingPhase(contracts.WaitToolPermission, "perm.run-1.3.call_1")
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, testConfig)
			inv := &scripted{body: text("ran")}
			start(t, e, inv, execcore.WithDelivery(bus.WithDelivery(-1)))
			c := call("call_1", toolOfMode[replaySafe.Mode], replaySafe)
			rev := uint64(0)
			if tt.rec != nil {
				rev, _ = e.Calls.Create(e.Ctx, c.Key(), tt.rec(c.Record()))
			}
			e.Publish(c, pipeline.ExecRequestID(c.Op(), 1))
			natstest.WaitFor(t, exectest.Wait, func() bool {
				cons, err := e.JS.Consumer(e.Ctx, e.Names.CallRecordsStream(), contracts.ConsumerBrainExec)
				if err != nil {
					return false
				}
				info, err := cons.Info(e.Ctx)
				return err == nil && info.NumRedelivered > 0
			}, "the request to be redelivered")
			// The gate's write becomes visible: a plain write, as a replica catching up
			// shows the revision the request already was (not a second request).
			_ = rev
			kv, err := e.JS.KeyValue(e.Ctx, e.Names.CallsBucket())
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(c.Record())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(e.Ctx, c.Key(), data); err != nil {
				t.Fatal(err)
			}
			if got, _ := exectest.Text(t, e.WaitTerminal(c)); got != "ran" {
				t.Errorf("output %q", got)
			}
			checkOneOutput(t, e, c, contracts.OutcomeCompleted)
			if n := len(inv.invocations()); n != 1 {
				t.Errorf("%d invocations, want 1", n)
			}
		})
	}
}

// TestInvocationOutcomes covers what an invocation can end with.
func TestInvocationOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		tool       string
		body       body
		wantText   string
		wantPrefix bool
		wantError  bool
	}{
		{"timeout honoured by the tool", "quick", func(ctx context.Context, _ execcore.Invocation) (contracts.ToolOutput, error) {
			<-ctx.Done()
			return contracts.ToolOutput{}, ctx.Err()
		}, "tool execution failed: timed out", false, true},
		{"timeout ignored by the tool", "quick", func(ctx context.Context, _ execcore.Invocation) (contracts.ToolOutput, error) {
			t := time.NewTimer(3 * time.Second) // ignores ctx on purpose
			defer t.Stop()
			<-t.C
			return contracts.TextOutput("", "too late"), nil
		}, "tool execution failed: timed out", false, true},
		{"panic becomes an execution error", "tool", func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
			panic("boom")
		}, "tool execution failed: panic: boom", false, true},
		{"output just under the inline limit", "tool", text(strings.Repeat("y", contracts.DefaultInlineOutputBytes-100)),
			strings.Repeat("y", contracts.DefaultInlineOutputBytes-100), false, false},
		{"plain error", "tool", func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
			return contracts.ToolOutput{}, errors.New("disk on fire")
		}, "tool execution failed: disk on fire", false, true},
		{"typed tool error kept", "tool", func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
			return contracts.ToolOutput{}, contracts.InvalidArguments("field \"x\" is missing")
		}, "invalid tool arguments: field \"x\" is missing", false, true},
		{"empty output normalised", "tool", text("  "), contracts.EmptySuccessText, false, false},
		{"invalid output rejected", "tool", func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
			return contracts.ToolOutput{Content: []contracts.ContentBlock{{Type: "video"}}}, nil
		}, "tool execution failed: invalid tool output:", true, true},
		{"operation id visible in the context", "tool", func(ctx context.Context, inv execcore.Invocation) (contracts.ToolOutput, error) {
			from, ok := tool.InvocationFrom(ctx)
			if !ok || from.CallID != inv.CallID {
				return contracts.ToolOutput{}, errors.New("no invocation in context")
			}
			return contracts.TextOutput("", tool.OperationID(ctx)), nil
		}, contracts.OperationID("run-1", 3, "call_1"), false, false},
		{"unavailable before dispatch, retries exhausted", "tool", func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
			return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch("backend down")
		}, "tool executor unavailable before dispatch: backend down", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := exectest.New(t, testConfig)
			start(t, e, &scripted{body: tt.body})
			c := call("call_1", tt.tool, neverReplay)
			e.Allow(c)
			got, isErr := exectest.Text(t, e.WaitTerminal(c))
			if tt.wantPrefix && !strings.HasPrefix(got, tt.wantText) || !tt.wantPrefix && got != tt.wantText {
				t.Errorf("output %.120q, want %.120q", got, tt.wantText)
			}
			if isErr != tt.wantError {
				t.Errorf("is_error %v, want %v", isErr, tt.wantError)
			}
			checkOneOutput(t, e, c, contracts.OutcomeCompleted)
		})
	}
}

// TestUnavailableBeforeDispatchIsRetriedLocally: the executor retries in place, with the
// same attempt, and the call completes without any recovery.
func TestUnavailableBeforeDispatchIsRetriedLocally(t *testing.T) {
	e := exectest.New(t, testConfig)
	var tries exectest.Counter
	inv := &scripted{body: func(context.Context, execcore.Invocation) (contracts.ToolOutput, error) {
		tries.Add(1)
		if tries.Load() <= 2 {
			return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch("warming up")
		}
		return contracts.TextOutput("", "ready"), nil
	}}
	start(t, e, inv)
	c := call("call_1", "tool", neverReplay)
	e.Allow(c)
	rec := e.WaitTerminal(c)
	if got, isErr := exectest.Text(t, rec); got != "ready" || isErr {
		t.Fatalf("output %q error %v, want ready", got, isErr)
	}
	if got := exectest.Stages(rec); !slices.Equal(got, []string{"entered", "completed"}) {
		t.Errorf("timeline %v: a local retry must not be a recovery", got)
	}
	for i, inv := range inv.invocations() {
		if inv.Attempt != 1 {
			t.Errorf("invocation %d has attempt %d, want 1", i, inv.Attempt)
		}
	}
	if n := len(inv.invocations()); n != 3 {
		t.Errorf("invocations = %d, want 3", n)
	}
}

// TestCrashAfterCommitOrPublish: a handler that dies after committing, or after
// publishing, is redelivered; the redelivery only re-announces (deduplicated).
func TestCrashAfterCommitOrPublish(t *testing.T) {
	for _, point := range []pipeline.FaultPoint{pipeline.FaultAfterCommit, pipeline.FaultAfterPublish} {
		t.Run(string(point), func(t *testing.T) {
			e := exectest.New(t, testConfig)
			var hits exectest.Counter
			e.SetFault(exectest.FailTimes(point, 1, &hits))
			start(t, e, &scripted{body: text("once")})
			c := call("call_1", "tool", neverReplay)
			seq := e.Allow(c)
			e.WaitTerminal(c)
			e.WaitSettled(contracts.ConsumerBrainExec, seq)
			if hits.Load() < 2 && point == pipeline.FaultAfterPublish {
				t.Errorf("fault point reached %d times, want a redelivery to reach it again", hits.Load())
			}
			rec := e.Record(c)
			if got, _ := exectest.Text(t, rec); got != "once" {
				t.Fatalf("output %q", got)
			}
			checkEnded(t, e, c, contracts.OutcomeCompleted, 1)
		})
	}
}

// TestSlowToolOutlivesAckWait: the bus heartbeats the request while the tool runs, so a tool
// slower than the ack wait is not redelivered (which would recover it as a crash).
func TestSlowToolOutlivesAckWait(t *testing.T) {
	e := exectest.New(t, testConfig)
	start(t, e, &scripted{body: func(ctx context.Context, _ execcore.Invocation) (contracts.ToolOutput, error) {
		t := time.NewTimer(1500 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return contracts.TextOutput("", "done"), nil
		case <-ctx.Done():
			return contracts.ToolOutput{}, ctx.Err()
		}
	}}, execcore.WithDelivery(bus.WithAckWait(300*time.Millisecond)))
	c := call("call_1", "tool", neverReplay)
	seq := e.Allow(c)
	rec := e.WaitTerminal(c)
	if got, _ := exectest.Text(t, rec); got != "done" {
		t.Fatalf("output %q (phase %s %q)", got, rec.Phase.Kind, rec.Phase.Reason)
	}
	info := e.WaitSettled(contracts.ConsumerBrainExec, seq)
	if info.NumRedelivered != 0 {
		t.Errorf("redelivered %d messages", info.NumRedelivered)
	}
	if n := e.Ledger(c); n != 1 {
		t.Errorf("ledger = %d, want 1", n)
	}
}

// TestCallSettledElsewhereWhileRunning: the call is cancelled (made Indeterminate) while its
// tool runs; the executor keeps that outcome and still announces it.
func TestCallSettledElsewhereWhileRunning(t *testing.T) {
	e := exectest.New(t, testConfig)
	release := make(chan struct{})
	t.Cleanup(func() { closeOnce(release) })
	start(t, e, &scripted{body: func(ctx context.Context, _ execcore.Invocation) (contracts.ToolOutput, error) {
		<-release
		return contracts.TextOutput("", "late"), nil
	}})
	c := call("call_1", "tool", neverReplay)
	e.Allow(c)
	e.WaitEntered(c)
	if _, _, err := e.Calls.Update(e.Ctx, c.Key(), func(r *contracts.CallRecord, _ bool) error {
		r.Phase = contracts.IndeterminatePhase("cancelled")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	closeOnce(release)
	checkOneOutput(t, e, c, contracts.OutcomeIndeterminate)
	if rec := e.Record(c); rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != "cancelled" {
		t.Errorf("record %s %q, want the cancellation kept", rec.Phase.Kind, rec.Phase.Reason)
	}
}

// TestExhaustedDeliveriesMakeTheCallIndeterminate: a request that keeps failing until its
// last delivery makes the call Indeterminate and announces it, so the batch finishes.
func TestExhaustedDeliveriesMakeTheCallIndeterminate(t *testing.T) {
	e := exectest.New(t, testConfig)
	e.SetFault(exectest.FailTimes(pipeline.FaultInTool, -1, nil))
	start(t, e, &scripted{body: text("never kept")}, execcore.WithDelivery(bus.WithDelivery(3)))
	c := call("call_1", "replayable", contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 10})
	e.Allow(c)
	rec := e.WaitTerminal(c)
	if rec.Phase.Kind != contracts.PhaseIndeterminate || !strings.HasPrefix(rec.Phase.Reason, "brain-exec gave up after 3 deliveries") {
		t.Fatalf("record %s %q", rec.Phase.Kind, rec.Phase.Reason)
	}
	checkEnded(t, e, c, contracts.OutcomeIndeterminate, 3) // one body run per delivery
}

// TestMalformedRequestIsDeadLettered: a request that names no valid call is refused.
func TestMalformedRequestIsDeadLettered(t *testing.T) {
	e := exectest.New(t, testConfig)
	start(t, e, &scripted{body: text("x")})
	// A revision announced as an executor request whose record carries no input.
	c := exectest.Call{RunID: "run-1", Step: 1, CallID: "c", ToolID: "echo"}
	rec := c.Record()
	rec.Input = nil
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	ev := cloudevent.Event{ID: "bad-1", Source: "awaken/gate", Type: contracts.TypeExecRequest, Data: data}
	m := cloudevent.EncodeMsg(e.Names.CallRecordSubject(c.Key()), ev)
	m.Header.Del(jetstream.MsgIDHeader)
	ack, err := e.JS.PublishMsg(e.Ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	e.WaitSettled(contracts.ConsumerBrainExec, ack.Sequence)
	natstest.WaitFor(t, exectest.Wait, func() bool {
		s, err := e.JS.Stream(e.Ctx, e.Names.DeadLetterStream())
		if err != nil {
			return false
		}
		_, err = s.GetLastMsgForSubject(e.Ctx, e.Names.DeadLetterSubject(contracts.ConsumerBrainExec))
		return err == nil
	}, "the malformed request on the dead-letter stream")
}

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name string
		data string
		code contracts.RejectCode
	}{
		{"valid", `{"run_id":"r","step":1,"index":0,"call_id":"c","tool_id":"t","arguments":{},"target":"brain","policy":{"mode":"never_replay","max_attempts":3},"attempt":1}`, ""},
		{"unknown field", `{"run_id":"r","step":1,"call_id":"c","tool_id":"t","extra":1}`, contracts.RejectInvalidJSON},
		{"bad run id", `{"run_id":"r.x","step":1,"call_id":"c","tool_id":"t"}`, contracts.RejectInvalidID},
		{"bad call id", `{"run_id":"r","step":1,"call_id":"","tool_id":"t"}`, contracts.RejectInvalidID},
		{"negative step", `{"run_id":"r","step":-1,"call_id":"c","tool_id":"t"}`, contracts.RejectInvalidStep},
		{"no tool", `{"run_id":"r","step":1,"call_id":"c"}`, contracts.RejectInvalidField},
		{"not json", `{`, contracts.RejectInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := execcore.DecodeRequest([]byte(tt.data))
			var rej *contracts.Rejection
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.code != "" && (!errors.As(err, &rej) || rej.Code != tt.code):
				t.Fatalf("error %v, want rejection %s", err, tt.code)
			}
		})
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
