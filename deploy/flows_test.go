package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ctxFor returns a context that ends after d or with the test.
func ctxFor(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

func call(id, tool string, args any) contracts.ToolCall {
	b, _ := json.Marshal(args)
	return contracts.ToolCall{CallID: id, ToolID: tool, Arguments: b}
}

func batch(run string, step int64, tools []string, calls ...contracts.ToolCall) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: calls,
	}
}

// exampleBatch reads one of the repository's example batches.
func exampleBatch(tb testing.TB, name string) contracts.BatchSubmission {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		tb.Fatal(err)
	}
	var sub contracts.BatchSubmission
	if err := json.Unmarshal(b, &sub); err != nil {
		tb.Fatal(err)
	}
	return sub
}

// wantTexts checks the results of a batch, in model order, by output text prefix.
func wantTexts(tb testing.TB, res *client.BatchResult, want ...string) {
	tb.Helper()
	if len(res.Results) != len(want) {
		tb.Fatalf("%s: %d results, want %d", res.BatchID, len(res.Results), len(want))
	}
	for i, w := range want {
		r := res.Results[i]
		if r.Index != i {
			tb.Errorf("%s: result %d has index %d (model order broken)", res.BatchID, i, r.Index)
		}
		if got := r.Output.Text(); !strings.HasPrefix(got, w) {
			tb.Errorf("%s: result %d (%s) = %q, want prefix %q", res.BatchID, i, r.CallID, got, w)
		}
	}
}

// acceptanceFlow drives the public protocol end to end through c (a platform client):
// every gate outcome and both executors, approval, denial, a scheduled call, a
// client-executed call, cancellation, a rejected batch, a rejected resume, a duplicate
// submission and the event projection. It is run against the embedded secure stack and
// against the containers, so both prove the same promises. Run ids are prefixed with
// tag so the flow can run more than once on one deployment.
func acceptanceFlow(t *testing.T, c *client.Client, tag string) {
	ctx := ctxFor(t, 2*time.Minute)
	run := func(s string) string { return tag + "-" + s }
	// results waits for the results of sub.
	results := func(t *testing.T, sub contracts.BatchSubmission) *client.BatchResult {
		t.Helper()
		res, err := c.Await(ctx, sub.RunID, sub.Step)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	t.Run("every gate outcome, brain and sandbox", func(t *testing.T) {
		sub := exampleBatch(t, "batch-mixed.json")
		sub.RunID = run(sub.RunID)
		sub.Calls[1].Arguments = json.RawMessage(fmt.Sprintf(`{"name":%q}`, run("demo")))
		res, err := c.SubmitAndWait(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		wantTexts(t, res, "first", "1", "blocked: tool forbidden denied by policy",
			"stubbed: this tool is in maintenance", "tool execution failed: boom",
			`{"lines":2,"words":3,"bytes":14}`, "unknown tool: nope")
		// The same batch again is a no-op: same results, the counter body did not run again.
		again := results(t, sub)
		if _, err := c.Submit(ctx, sub); err != nil {
			t.Fatal(err)
		}
		if n, err := checker.Counter(ctx, c, run("demo")); err != nil || n != 1 {
			t.Errorf("counter after a duplicate submission = %d (%v), want 1", n, err)
		}
		if len(again.Results) != len(res.Results) {
			t.Errorf("re-read %d results, want %d", len(again.Results), len(res.Results))
		}
		// Under an event id of its own the stream does not drop it: the batcher settles it
		// as a no-op and tells the submitter (awaken.unchanged.{run}), which reads the
		// results it has.
		resubmitted, err := c.SubmitAndWait(ctx, sub, client.WithEventID(client.AttemptEventID(sub)))
		if err != nil {
			t.Fatalf("identical resubmission under a new event id: %v", err)
		}
		if resubmitted.Sequence != res.Sequence || len(resubmitted.Results) != len(res.Results) {
			t.Errorf("identical resubmission answered %s at sequence %d with %d results, want the first publication (%d, %d results)",
				resubmitted.BatchID, resubmitted.Sequence, len(resubmitted.Results), res.Sequence, len(res.Results))
		}
		if n, err := checker.Counter(ctx, c, run("demo")); err != nil || n != 1 {
			t.Errorf("counter after an identical resubmission = %d (%v), want 1", n, err)
		}
	})

	t.Run("parallel batch", func(t *testing.T) {
		// Every call of a delegate batch completes in parallel: the gate's probe decides
		// them together (one batch get of their records, each tool's pause read once) and
		// the publisher's barrier reads the calls not yet terminal from the leader.
		sub := batch(run("parallel"), 1, []string{"delegate"},
			call("d0", "delegate", map[string]any{"task": "a", "ms": 5}),
			call("d1", "delegate", map[string]any{"task": "b", "ms": 5}),
			call("d2", "delegate", map[string]any{"task": "c", "ms": 5}))
		res, err := c.SubmitAndWait(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		wantTexts(t, res, "delegated: a", "delegated: b", "delegated: c")
	})

	t.Run("approval", func(t *testing.T) {
		sub := exampleBatch(t, "batch-approval.json")
		sub.RunID = run(sub.RunID)
		sub.Calls[2].Arguments = json.RawMessage(fmt.Sprintf(`{"name":%q}`, run("approved")))
		tk := stacktest.Park(t, ctx, c, sub, "c2")
		listed, err := c.Tickets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range listed {
			found = found || l.CorrelationID == tk.CorrelationID
		}
		if !found {
			t.Errorf("ticket %s not listed", tk.CorrelationID)
		}
		// A resume for the wrong run is refused and leaves the ticket intact.
		bad := tk
		bad.RunID = run("other")
		_, err = c.Approve(ctx, bad, "wrong run")
		var rr *client.ResumeRejectedError
		if !errors.As(err, &rr) {
			t.Fatalf("resume with a wrong run: %v, want a rejection", err)
		}
		if _, err := c.Approve(ctx, tk, "ok"); err != nil {
			t.Fatal(err)
		}
		res := results(t, sub)
		wantTexts(t, res, "before approval", "", "1")
	})

	t.Run("denial", func(t *testing.T) {
		sub := batch(run("deny"), 1, []string{"ask_me"}, call("c1", "ask_me", map[string]any{}))
		if _, err := c.Deny(ctx, stacktest.Park(t, ctx, c, sub, "c1"), "not today"); err != nil {
			t.Fatal(err)
		}
		wantTexts(t, results(t, sub), "blocked: not today")
	})

	t.Run("scheduled call runs without a human", func(t *testing.T) {
		res, err := c.SubmitAndWait(ctx, batch(run("later"), 1, []string{"later"}, call("c1", "later", map[string]any{})))
		if err != nil {
			t.Fatal(err)
		}
		if res.Results[0].Output.IsError {
			t.Errorf("scheduled call: %q", res.Results[0].Output.Text())
		}
	})

	t.Run("client-executed call", func(t *testing.T) {
		sub := batch(run("client"), 1, []string{"client_pick"}, call("c1", "client_pick", map[string]any{}))
		if _, err := c.CompleteClientCall(ctx, stacktest.Park(t, ctx, c, sub, "c1"), contracts.TextOutput("c1", "picked")); err != nil {
			t.Fatal(err)
		}
		wantTexts(t, results(t, sub), "picked")
	})

	t.Run("cancellation", func(t *testing.T) {
		sub := batch(run("cancel"), 1, []string{"ask_me", "echo"},
			call("c1", "ask_me", map[string]any{}), call("c2", "echo", map[string]any{"text": "never"}))
		stacktest.Park(t, ctx, c, sub, "c1")
		if err := c.Cancel(ctx, sub.RunID, "user left"); err != nil {
			t.Fatal(err)
		}
		for _, r := range results(t, sub).Results {
			if r.Outcome != contracts.OutcomeIndeterminate {
				t.Errorf("%s after cancel: %s %q", r.CallID, r.Outcome, r.Output.Text())
			}
		}
	})

	t.Run("invalid batch is rejected", func(t *testing.T) {
		bad := batch(run("bad"), 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "x"}),
			call("c1", "echo", map[string]any{"text": "y"}))
		_, err := c.SubmitAndWait(ctx, bad)
		var rej *client.RejectedError
		if !errors.As(err, &rej) || rej.Code != string(contracts.RejectDuplicateCall) {
			t.Fatalf("duplicate call id: %v, want rejection %s", err, contracts.RejectDuplicateCall)
		}
	})

	t.Run("live facts are heard, none stored", func(t *testing.T) {
		// tool_call and tool_result are live facts on the run's facts subject: a
		// platform that listens hears both; the events stream stores neither.
		sub := batch(run("run-facts"), 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "x"}))
		live, err := c.Conn().SubscribeSync(contracts.NewNames(c.Prefix()).FactsSubject(sub.RunID))
		if err != nil {
			t.Fatal(err)
		}
		defer live.Unsubscribe()
		if err := c.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SubmitAndWait(ctx, sub); err != nil {
			t.Fatal(err)
		}
		heard := map[contracts.AgentEventType]bool{}
		for !heard[contracts.EventToolCall] || !heard[contracts.EventToolResult] {
			m, err := live.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("heard %v, want tool_call and tool_result: %v", heard, err)
			}
			ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
			if err != nil || ev.Type != contracts.TypeAgentEvent {
				t.Fatalf("live fact %s (%v)", ev.Type, err)
			}
			var f contracts.AgentEvent
			if err := json.Unmarshal(ev.Data, &f); err != nil || f.Event.ID != "c1" {
				t.Fatalf("live fact %s: %+v (%v)", ev.ID, f, err)
			}
			heard[f.Event.Type] = true
		}
		js, err := jetstream.New(c.Conn())
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, contracts.NewNames(c.Prefix()).EventsStream())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetLastMsgForSubject(ctx, contracts.NewNames(c.Prefix()).EventsSubject(sub.RunID)); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("the events stream holds a message of %s (%v), want none", sub.RunID, err)
		}
	})
}
