package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestPipeline_everyGateOutcomeInModelOrder(t *testing.T) {
	h := newHarness(t)
	sub := batch("run-outcomes", 1, []string{"echo", "counter", "forbidden", "stub", "fail", "invalid", "nope"},
		call("c1", "echo", map[string]any{"text": "first"}),
		call("c2", "counter", map[string]any{"name": "outcomes"}),
		call("c3", "forbidden", map[string]any{}),
		call("c4", "stub", map[string]any{}),
		call("c5", "fail", map[string]any{"message": "boom"}),
		call("c6", "echo", map[string]any{"text": "hidden"}), // echo is visible; c6 checks arguments below
		call("c7", "nope", map[string]any{}),
	)
	// c6: echo with an unknown argument field → invalid arguments.
	sub.Calls[5] = call("c6", "echo", map[string]any{"txt": "typo"})
	res := h.mustRun(sub)

	wantCompleted(t, res, strings.HasPrefix,
		resultWant{"c1", "first", false},
		resultWant{"c2", "1", false},
		resultWant{"c3", "blocked: tool forbidden denied by policy", true},
		resultWant{"c4", "stubbed: this tool is in maintenance", false},
		resultWant{"c5", "tool execution failed: boom", true},
		resultWant{"c6", "invalid tool arguments:", true},
		resultWant{"c7", "unknown tool: nope", true},
	)
	if got := res.Finalized.CallIDs; strings.Join(got, ",") != "c1,c2,c3,c4,c5,c6,c7" {
		t.Errorf("finalized call_ids %v", got)
	}
	if n := h.ledger("run-outcomes", 1, "c3"); n != 0 {
		t.Errorf("denied tool body ran %d times", n)
	}
	if n := h.ledger("run-outcomes", 1, "c4"); n != 0 {
		t.Errorf("stubbed tool body ran %d times; SetResult must not enter an executor", n)
	}
}

// resultWant is one result a batch must hold: its call, its output text and whether
// that output is an error.
type resultWant struct {
	callID, text string
	isError      bool
}

// wantCompleted fails t unless res holds one completed result per want, in model order
// (each at its index), with want's call id and is_error flag and an output text that
// match accepts against want's (strings.HasPrefix, or exact equality).
func wantCompleted(t *testing.T, res *client.BatchResult, match func(got, want string) bool, want ...resultWant) {
	t.Helper()
	if len(res.Results) != len(want) {
		t.Fatalf("got %d results, want %d", len(res.Results), len(want))
	}
	for i, w := range want {
		r := res.Results[i]
		if r.Index != i || r.CallID != w.callID {
			t.Errorf("result %d is %s (index %d), want %s in model order", i, r.CallID, r.Index, w.callID)
		}
		if !match(r.Output.Text(), w.text) || r.Output.IsError != w.isError {
			t.Errorf("%s: got %q (is_error %v), want %q (is_error %v)", w.callID, r.Output.Text(), r.Output.IsError, w.text, w.isError)
		}
		if r.Outcome != contracts.OutcomeCompleted {
			t.Errorf("%s: outcome %s", w.callID, r.Outcome)
		}
	}
}

func TestPipeline_invisibleToolAndArgumentTargetChangeNothing(t *testing.T) {
	h := newHarness(t)
	res := h.mustRun(batch("run-visibility", 1, []string{"echo"},
		call("c1", "counter", map[string]any{"name": "invisible"}),
		call("c2", "echo", map[string]any{"text": "x", "target": "sandbox"}),
	))
	if got := res.Results[0].Output.Text(); got != "unknown tool: counter" {
		t.Errorf("invisible tool: %q", got)
	}
	if n, _ := checker.Counter(ctxFor(t, 5*time.Second), h.client, "invisible"); n != 0 {
		t.Errorf("invisible counter ran: %d", n)
	}
	// echo is typed: an extra "target" field is an invalid argument, and above all it never
	// routes the call anywhere but the trusted brain target.
	if got := res.Results[1].Output.Text(); !strings.HasPrefix(got, "invalid tool arguments") {
		t.Errorf("target in arguments: %q", got)
	}
}

func TestPipeline_counterRunsExactlyOnce(t *testing.T) {
	h := newHarness(t)
	var calls []contracts.ToolCall
	for i := range 5 {
		calls = append(calls, call(fmt.Sprintf("c%d", i), "counter", map[string]any{"name": "once"}))
	}
	res := h.mustRun(batch("run-counter", 1, []string{"counter"}, calls...))
	for i, r := range res.Results {
		if got, want := r.Output.Text(), fmt.Sprint(i+1); got != want {
			t.Errorf("call %d: counter returned %q, want %q (model order)", i, got, want)
		}
	}
	if n, _ := checker.Counter(ctxFor(t, 5*time.Second), h.client, "once"); n != 5 {
		t.Errorf("counter = %d, want 5", n)
	}
}

func TestPipeline_barrierHoldsWhileACallRuns(t *testing.T) {
	h := newHarness(t)
	sub := batch("run-barrier", 1, []string{"echo", "slow"},
		call("c1", "echo", map[string]any{"text": "done early"}),
		call("c2", "slow", map[string]any{"ms": 1500}),
	)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := h.client.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	// Wait until the slow call is running: its body has been entered.
	natstest.WaitFor(t, 30*time.Second, func() bool { return h.ledger("run-barrier", 1, "c2") == 1 }, "slow call entered")
	if n := h.resultsOnSubject("run-barrier"); n != 0 {
		t.Fatalf("%d results published while a call of the batch was still running", n)
	}
	res, err := h.client.Await(ctx, "run-barrier", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(res); strings.Join(got, "|") != "done early|done" {
		t.Errorf("results %v", got)
	}
	if n := h.resultsOnSubject("run-barrier"); n != 1 {
		t.Errorf("%d messages on the results subject, want one results message", n)
	}
}

func TestPipeline_duplicateSubmission(t *testing.T) {
	h := newHarness(t)
	sub := batch("run-dup", 1, []string{"counter"}, call("c1", "counter", map[string]any{"name": "dup"}))
	h.mustRun(sub)
	// Identical content again: no second execution, no second publication.
	res := h.mustRun(sub)
	if got := res.Results[0].Output.Text(); got != "1" {
		t.Errorf("resubmission result %q", got)
	}
	if n, _ := checker.Counter(ctxFor(t, 5*time.Second), h.client, "dup"); n != 1 {
		t.Errorf("counter ran %d times", n)
	}
	// Different content under the same batch id: conflict.
	other := sub
	other.Calls = []contracts.ToolCall{call("c1", "counter", map[string]any{"name": "other"})}
	_, err := h.client.SubmitAndWait(ctxFor(t, 30*time.Second), other)
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Code != string(contracts.RejectConflict) {
		t.Fatalf("different content: got %v, want a conflict rejection", err)
	}
	if n := h.resultsOnSubject("run-dup"); n != 1 {
		t.Errorf("%d messages on the results subject, want exactly one publication (one results message)", n)
	}
}

func TestPipeline_faultAtEveryHopStillRunsOncePublishesOnce(t *testing.T) {
	points := []pipeline.FaultPoint{pipeline.FaultAfterCommit, pipeline.FaultAfterPublish}
	services := []string{"batcher", "gate", "brain-exec", "publisher"}
	for _, svc := range services {
		for _, p := range points {
			t.Run(svc+"/"+string(p), func(t *testing.T) {
				h := newHarness(t)
				var once sync.Map
				h.setFaults(func(ctx context.Context, service string, point pipeline.FaultPoint, op string) error {
					if service != svc || point != p {
						return nil
					}
					if _, loaded := once.LoadOrStore(op, true); loaded {
						return nil
					}
					return fmt.Errorf("injected fault: %s at %s on %s", service, point, op)
				})
				run := "run-fault-" + strings.ReplaceAll(svc+"-"+string(p), "_", "-")
				res := h.mustRun(batch(run, 1, []string{"echo", "counter"},
					call("c1", "counter", map[string]any{"name": run}),
					call("c2", "echo", map[string]any{"text": "after"}),
				))
				if got := texts(res); strings.Join(got, "|") != "1|after" {
					t.Errorf("results %v", got)
				}
				if n := h.ledger(run, 1, "c1"); n != 1 {
					t.Errorf("counter body ran %d times", n)
				}
				if n := h.resultsOnSubject(run); n != 1 {
					t.Errorf("%d messages on the results subject, want one publication (one results message)", n)
				}
			})
		}
	}
}

func TestPipeline_executorRedeliveredWhileExecuting(t *testing.T) {
	h := newHarness(t)
	// The tool body fails as if the process died inside it: the executor's message is
	// redelivered while its call is durably Executing.
	var once sync.Map
	h.setFaults(func(ctx context.Context, service string, point pipeline.FaultPoint, op string) error {
		if point != pipeline.FaultInTool {
			return nil
		}
		if _, loaded := once.LoadOrStore(op, true); loaded {
			return nil
		}
		return errors.New("injected crash inside the tool")
	})
	res := h.mustRun(batch("run-redeliver", 1, []string{"counter", "echo"},
		call("c1", "counter", map[string]any{"name": "redeliver"}),
		call("c2", "echo", map[string]any{"text": "replayed"}),
	))
	if r := res.Results[0]; r.Outcome != contracts.OutcomeIndeterminate ||
		!strings.HasPrefix(r.Output.Text(), "tool outcome is indeterminate:") {
		t.Errorf("never_replay call: outcome %s %q, want indeterminate", r.Outcome, r.Output.Text())
	}
	if n := h.ledger("run-redeliver", 1, "c1"); n != 1 {
		t.Errorf("never_replay body ran %d times, want 1", n)
	}
	if r := res.Results[1]; r.Outcome != contracts.OutcomeCompleted || r.Output.Text() != "replayed" {
		t.Errorf("replay_safe call: outcome %s %q, want completed after a retry", r.Outcome, r.Output.Text())
	}
	if n := h.ledger("run-redeliver", 1, "c2"); n != 2 {
		t.Errorf("replay_safe body ran %d times, want 2 (one crash, one retry)", n)
	}
}

func TestPipeline_largeBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("512 sequential calls")
	}
	h := newHarness(t)
	var calls []contracts.ToolCall
	for i := range contracts.MaxCallsPerBatch {
		calls = append(calls, call(fmt.Sprintf("c%d", i), "echo", map[string]any{"text": fmt.Sprint(i)}))
	}
	res := h.mustRun(batch("run-512", 1, []string{"echo"}, calls...))
	if len(res.Results) != contracts.MaxCallsPerBatch {
		t.Fatalf("%d results", len(res.Results))
	}
	for i, r := range res.Results {
		if r.Output.Text() != fmt.Sprint(i) {
			t.Fatalf("result %d = %q", i, r.Output.Text())
		}
	}
}

func TestPipeline_concurrentRuns(t *testing.T) {
	h := newHarness(t)
	const runs = 100
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Go(func() {
			run := fmt.Sprintf("run-conc-%d", i)
			res, err := h.client.SubmitAndWait(ctxFor(t, 120*time.Second), batch(run, 1, []string{"echo", "counter"},
				call("a", "echo", map[string]any{"text": run}),
				call("b", "counter", map[string]any{"name": run}),
			))
			if err != nil {
				errs <- fmt.Errorf("%s: %w", run, err)
				return
			}
			if got := texts(res); strings.Join(got, "|") != run+"|1" {
				errs <- fmt.Errorf("%s: results %v", run, got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPipeline_restartFinishesInFlightBatches(t *testing.T) {
	h := newHarness(t)
	ctx := ctxFor(t, 60*time.Second)
	sub := batch("run-restart", 1, []string{"slow", "counter"},
		call("c1", "slow", map[string]any{"ms": 300}),
		call("c2", "counter", map[string]any{"name": "restart"}),
	)
	if _, err := h.client.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool { return h.ledger("run-restart", 1, "c1") == 1 }, "slow call entered")
	h.restart()
	res, err := h.client.Await(ctx, "run-restart", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(res); strings.Join(got, "|") != "done|1" {
		t.Errorf("results after restart %v", got)
	}
}

// TestPipeline_parallelDeclaredCallsRunConcurrently: lookup declares parallel in the
// example configuration, so three lookups of 1 s in one batch run at once — every body
// is entered before any completes, as their call records' timelines show — and the
// results come back in model order. A batch with one call that does not declare parallel
// runs its calls one after another: the first body completes before the next is entered.
func TestPipeline_parallelDeclaredCallsRunConcurrently(t *testing.T) {
	h := newHarness(t)
	ids := []string{"l0", "l1", "l2"}
	var calls []contracts.ToolCall
	for _, id := range ids {
		calls = append(calls, call(id, "lookup", map[string]any{"ms": 1000}))
	}
	res := h.mustRun(batch("run-lookup", 1, []string{"lookup"}, calls...))
	if got := strings.Join(texts(res), "|"); got != "looked up in 1000 ms|looked up in 1000 ms|looked up in 1000 ms" {
		t.Errorf("results %q", got)
	}
	for i, r := range res.Results {
		if r.CallID != ids[i] {
			t.Errorf("result %d is %s, want %s (model order)", i, r.CallID, ids[i])
		}
	}
	start, end := h.bodySpan(t, "run-lookup", ids...)
	if !start.Before(end) {
		t.Errorf("the lookups did not overlap: the last body was entered at %s, the first completed at %s", start, end)
	}

	mixed := h.mustRun(batch("run-lookup-mixed", 1, []string{"lookup", "echo"},
		call("m0", "lookup", map[string]any{"ms": 50}), call("m1", "echo", map[string]any{"text": "after"})))
	if got := strings.Join(texts(mixed), "|"); got != "looked up in 50 ms|after" {
		t.Errorf("mixed results %q", got)
	}
	if start, end := h.bodySpan(t, "run-lookup-mixed", "m0", "m1"); start.Before(end) {
		t.Errorf("a mixed batch overlapped: echo entered at %s, before lookup completed at %s", start, end)
	}
}

// bodySpan reads the call records of calls of step 1 of run and returns when the last
// body was entered and when the first completed: the bodies overlapped when start is
// before end. A call pinned replay_safe is not claimed before its body runs, so its
// entry into execution (which its body cannot precede) stands for its start.
func (h *harness) bodySpan(t *testing.T, run string, calls ...string) (start, end time.Time) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	for _, id := range calls {
		rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, id))
		if err != nil {
			t.Fatalf("call %s: %v", id, err)
		}
		entered, ok1 := rec.MarkTime(contracts.StageEntered)
		if !ok1 {
			entered, ok1 = rec.MarkTime(contracts.StageExecuting)
		}
		completed, ok2 := rec.MarkTime(contracts.StageCompleted)
		if !ok1 || !ok2 {
			t.Fatalf("call %s: timeline %+v has no entry and completion", id, rec.Timeline)
		}
		if entered.After(start) {
			start = entered
		}
		if end.IsZero() || completed.Before(end) {
			end = completed
		}
	}
	return start, end
}
