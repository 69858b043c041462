package e2e_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// approvalBatch is [echo, ask_me, counter] on run.
func approvalBatch(run string) contracts.BatchSubmission {
	return batch(run, 1, []string{"echo", "ask_me", "counter"},
		call("c1", "echo", map[string]any{"text": "before"}),
		call("c2", "ask_me", map[string]any{"why": "a human decides"}),
		call("c3", "counter", map[string]any{"name": run}),
	)
}

// parkedAt submits the approval batch and waits until ask_me is parked, checking that the
// call after it has not been gated.
func (h *harness) parkedAt(run string) contracts.ResumeTicket {
	h.tb.Helper()
	ctx := ctxFor(h.tb, 60*time.Second)
	t := h.submitUntilParked(ctx, approvalBatch(run), "c2")
	if t.Reason != contracts.ReasonPermission || t.ToolID != "ask_me" || t.RunID != run {
		h.tb.Fatalf("ticket %+v", t)
	}
	if n := h.ledger(run, 1, "c1"); n != 1 {
		h.tb.Errorf("echo before the parked call ran %d times, want 1", n)
	}
	if rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, "c3")); err == nil {
		h.tb.Errorf("the call after a parked call was gated while the batch was stopped: %+v", rec.Phase)
	}
	if n := h.resultsOnSubject(run); n != 0 {
		h.tb.Errorf("%d results published while a call is parked", n)
	}
	return t
}

func TestApproval_approveRunsTheParkedAndLaterCallsOnce(t *testing.T) {
	h := newHarness(t)
	ticket := h.parkedAt("run-approve")
	ctx := ctxFor(t, 60*time.Second)
	res, err := h.client.Approve(ctx, ticket, "looks fine")
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != "approved" {
		t.Errorf("resolution %+v", res)
	}
	h.wantResults(ctx, "run-approve", "before|ran ask_me|1")
	for _, c := range []string{"c1", "c2", "c3"} {
		if n := h.ledger("run-approve", 1, c); n != 1 {
			t.Errorf("%s ran %d times", c, n)
		}
	}
	// A second resume after success: not_waiting.
	_, err = h.client.Approve(ctx, ticket, "again")
	var rr *client.ResumeRejectedError
	if !errors.As(err, &rr) || rr.Code != string(contracts.ResumeNotWaiting) {
		t.Errorf("second approve: %v, want not_waiting", err)
	}
}

func TestApproval_denyBlocksAndTheBatchContinues(t *testing.T) {
	h := newHarness(t)
	ticket := h.parkedAt("run-deny")
	ctx := ctxFor(t, 60*time.Second)
	if _, err := h.client.Deny(ctx, ticket, "not today"); err != nil {
		t.Fatal(err)
	}
	h.wantResults(ctx, "run-deny", "before|blocked: not today|1")
	if n := h.ledger("run-deny", 1, "c2"); n != 0 {
		t.Errorf("denied call ran %d times", n)
	}
}

func TestApproval_survivesARestartOfEveryService(t *testing.T) {
	h := newHarness(t)
	ticket := h.parkedAt("run-restart-approve")
	h.restart()
	ctx := ctxFor(t, 60*time.Second)
	if _, err := h.client.Approve(ctx, ticket, ""); err != nil {
		t.Fatal(err)
	}
	h.wantResults(ctx, "run-restart-approve", "before|ran ask_me|1")
}

func TestApproval_twoRunsParkedAtOnceAndConcurrentAnswers(t *testing.T) {
	h := newHarness(t)
	a := h.parkedAt("run-par-a")
	b := h.parkedAt("run-par-b")
	ctx := ctxFor(t, 60*time.Second)
	// Many concurrent approvals and denials of run a: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, notWaiting := 0, 0
	for i := range 8 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = h.client.Approve(ctx, a, "")
			} else {
				_, err = h.client.Deny(ctx, a, "no")
			}
			mu.Lock()
			defer mu.Unlock()
			var rr *client.ResumeRejectedError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &rr) && rr.Code == string(contracts.ResumeNotWaiting):
				notWaiting++
			default:
				t.Errorf("unexpected answer: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || notWaiting != 7 {
		t.Errorf("%d won and %d got not_waiting; want exactly one winner", wins, notWaiting)
	}
	if _, err := h.client.Deny(ctx, b, "b denied"); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"run-par-a", "run-par-b"} {
		out, err := h.client.Await(ctx, run, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 3 {
			t.Errorf("%s: %d results", run, len(out.Results))
		}
	}
	if n := h.ledger("run-par-a", 1, "c2"); n > 1 {
		t.Errorf("the contested call ran %d times", n)
	}
}

func TestApproval_forgedAndMismatchedResumesAreRejected(t *testing.T) {
	h := newHarness(t)
	ticket := h.parkedAt("run-forged")
	other := h.parkedAt("run-forged-other")
	ctx := ctxFor(t, 60*time.Second)
	allow := contracts.ResumeResult{Permission: &contracts.PermissionDecision{Decision: contracts.DecisionAllow}}
	cases := []struct {
		name string
		cmd  contracts.ResumeCommand
		code contracts.ResumeErrorCode
	}{
		{"unknown ticket", contracts.ResumeCommand{CorrelationID: "perm.nope.1.c9", RunID: "nope", ThreadID: "t", SnapshotID: "s", Result: allow}, contracts.ResumeNotWaiting},
		{"another run's ids", func() contracts.ResumeCommand {
			c := contracts.ResumeCommandFromTicket(ticket, allow)
			c.RunID, c.ThreadID = other.RunID, other.ThreadID
			return c
		}(), contracts.ResumeRunMismatch},
		{"wrong thread", func() contracts.ResumeCommand {
			c := contracts.ResumeCommandFromTicket(ticket, allow)
			c.ThreadID = "thread-x"
			return c
		}(), contracts.ResumeThreadMismatch},
		{"wrong snapshot", func() contracts.ResumeCommand {
			c := contracts.ResumeCommandFromTicket(ticket, allow)
			c.SnapshotID = "snap-x"
			return c
		}(), contracts.ResumeSnapshotMismatch},
		{"tool_result for a permission ticket", contracts.ResumeCommandFromTicket(ticket, contracts.ResumeResult{
			ToolResult: &contracts.ToolOutput{CallID: "c2", Content: []contracts.ContentBlock{{Type: contracts.BlockText, Text: "forged"}}},
		}), contracts.ResumeResultKindMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.Resume(ctx, tc.cmd)
			var rr *client.ResumeRejectedError
			if !errors.As(err, &rr) || rr.Code != string(tc.code) {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
	// Every rejection left the ticket intact: the real approval still works.
	if _, err := h.client.Approve(ctx, ticket, ""); err != nil {
		t.Fatalf("approval after rejected forgeries: %v", err)
	}
	if _, err := h.client.Await(ctx, "run-forged", 1); err != nil {
		t.Fatal(err)
	}
}

func TestApproval_clientExecutedTool(t *testing.T) {
	h := newHarness(t)
	ctx := ctxFor(t, 60*time.Second)
	run := "run-client"
	ticket := h.submitUntilParked(ctx, batch(run, 1, []string{"client_pick", "echo"},
		call("c1", "client_pick", map[string]any{"options": []string{"a", "b"}}),
		call("c2", "echo", map[string]any{"text": "after"}),
	), "c1")
	if ticket.Reason != contracts.ReasonClientExecution {
		t.Fatalf("reason %s", ticket.Reason)
	}
	// A result for another call id is refused.
	_, err := h.client.CompleteClientCall(ctx, ticket, contracts.TextOutput("c2", "wrong"))
	var rr *client.ResumeRejectedError
	if !errors.As(err, &rr) || rr.Code != string(contracts.ResumeToolCallMismatch) {
		t.Fatalf("wrong call id: %v", err)
	}
	if _, err := h.client.CompleteClientCall(ctx, ticket, contracts.TextOutput("c1", "picked b")); err != nil {
		t.Fatal(err)
	}
	h.wantResults(ctx, run, "picked b|after")
}

func TestApproval_expiry(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.Policy.Rules[0].Timeout = contracts.Duration(time.Second) // ask_me expires after 1s
	h := newHarness(t, withConfig(mustReparse(t, cfg)))
	ticket := h.parkedAt("run-expiry")
	ctx := ctxFor(t, 60*time.Second)
	h.wantResults(ctx, "run-expiry", "before|blocked: approval timed out|1")
	_, err := h.client.Approve(ctx, ticket, "too late")
	var rr *client.ResumeRejectedError
	if !errors.As(err, &rr) || (rr.Code != string(contracts.ResumeExpired) && rr.Code != string(contracts.ResumeNotWaiting)) {
		t.Errorf("late approval: %v, want expired", err)
	}
	if n := h.ledger("run-expiry", 1, "c2"); n != 0 {
		t.Errorf("expired call ran %d times", n)
	}
}

func TestSchedule_runsOnTimeAcrossARestart(t *testing.T) {
	h := newHarness(t)
	ctx := ctxFor(t, 60*time.Second)
	run := "run-later"
	start := time.Now()
	ticket := h.submitUntilParked(ctx, batch(run, 1, []string{"later", "echo"},
		call("c1", "later", map[string]any{}),
		call("c2", "echo", map[string]any{"text": "after"}),
	), "c1")
	if ticket.Reason != contracts.ReasonScheduledAction || ticket.DueAt == nil {
		t.Fatalf("ticket %+v", ticket)
	}
	h.restart() // every service restarts while the schedule is pending
	h.wantResults(ctx, run, "ran later|after")
	if elapsed := time.Since(start); elapsed < 2*time.Second {
		t.Errorf("scheduled call ran after %v, before its 2s delay", elapsed)
	}
}

func TestCancel_sealsTheRunWithAPendingSchedule(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.Policy.Rules[1].Delay = contracts.Duration(time.Hour) // "later" would run in an hour
	h := newHarness(t, withConfig(mustReparse(t, cfg)))
	ctx := ctxFor(t, 60*time.Second)
	run := "run-cancel"
	ticket := h.submitUntilParked(ctx, batch(run, 1, []string{"echo", "later", "counter"},
		call("c1", "echo", map[string]any{"text": "done"}),
		call("c2", "later", map[string]any{}),
		call("c3", "counter", map[string]any{"name": run}),
	), "c2")
	if err := h.client.Cancel(ctx, run, "user pressed stop"); err != nil {
		t.Fatal(err)
	}
	out, err := h.client.Await(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []contracts.Outcome{contracts.OutcomeCompleted, contracts.OutcomeIndeterminate, contracts.OutcomeIndeterminate}
	for i, r := range out.Results {
		if r.Outcome != want[i] {
			t.Errorf("call %d: %s %q, want %s", i, r.Outcome, r.Output.Text(), want[i])
		}
	}
	if got := out.Results[1].Output.Text(); got != "tool outcome is indeterminate: cancelled" {
		t.Errorf("cancelled call: %q", got)
	}
	natstest.WaitFor(t, 10*time.Second, func() bool {
		_, err := h.client.Ticket(ctx, ticket.CorrelationID)
		return err != nil
	}, "ticket cleared by cancel")
	_, err = h.client.Approve(ctx, ticket, "late")
	var rr *client.ResumeRejectedError
	if !errors.As(err, &rr) || rr.Code != string(contracts.ResumeNotWaiting) {
		t.Errorf("late approval after cancel: %v, want not_waiting", err)
	}
	if n := h.resultsOnSubject(run); n != 1 {
		t.Errorf("%d messages on the results subject, want one publication (one results message)", n)
	}
}

// mustReparse re-validates a modified configuration the way Load would.
func mustReparse(t *testing.T, cfg *config.Config) *config.Config {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestApproval_declaredParallelRunsTheOthersWhileOneWaits: in a batch whose calls all
// declare parallel (lookup, and ask_me declared so here), the ask parks its call while the
// two lookups run to completion; the barrier holds until the approval runs the parked
// call, and then publishes one results message in model order.
func TestApproval_declaredParallelRunsTheOthersWhileOneWaits(t *testing.T) {
	cfg := exampleConfig(t)
	for i := range cfg.Tools {
		if cfg.Tools[i].ID == "ask_me" {
			cfg.Tools[i].Parallel = true
		}
	}
	h := newHarness(t, withConfig(cfg))
	run := "run-parallel-ask"
	ctx := ctxFor(t, 60*time.Second)
	sub := batch(run, 1, []string{"lookup", "ask_me"},
		call("p0", "lookup", map[string]any{"ms": 10}),
		call("p1", "ask_me", map[string]any{"why": "a human decides"}),
		call("p2", "lookup", map[string]any{"ms": 10}),
	)
	ticket := h.submitUntilParked(ctx, sub, "p1")
	for _, id := range []string{"p0", "p2"} {
		natstest.WaitFor(t, 30*time.Second, func() bool {
			rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, id))
			return err == nil && rec.Phase.Kind == contracts.PhaseCompleted
		}, id+" completed while p1 waits")
	}
	if n := h.resultsOnSubject(run); n != 0 {
		t.Fatalf("%d results published while a call is parked", n)
	}
	if _, err := h.client.Approve(ctx, ticket, "fine"); err != nil {
		t.Fatal(err)
	}
	h.wantResults(ctx, run, "looked up in 10 ms|ran ask_me|looked up in 10 ms")
	for _, c := range []string{"p0", "p1", "p2"} {
		if n := h.ledger(run, 1, c); n != 1 {
			t.Errorf("%s ran %d times, want 1", c, n)
		}
	}
	if n := h.resultsOnSubject(run); n != 1 {
		t.Errorf("%d messages on the results subject, want one results message", n)
	}
}
