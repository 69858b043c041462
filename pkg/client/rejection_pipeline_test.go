package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const rejectionTestConfig = `
tools:
  - id: ask_me
    builtin: ran
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask }
`

// A conflicting submission that names the same batch id is rejected under its own event
// id; the valid submission, accepted and run, is not reported rejected by SubmitAndWait.
// The real batcher, gate, brain-exec and publisher on an embedded server: the valid batch
// parks on an approval, so the conflicting one is rejected while SubmitAndWait waits.
func TestSubmitAndWaitIgnoresTheRejectionOfAnotherSubmissionOfTheSameBatch(t *testing.T) {
	cfg := servicetest.ParseConfig(t, rejectionTestConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := stacktest.NewServer(t)
	srv.StartStack(ctx, app.Options{Config: cfg, Services: []string{contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher}})
	nc, c := srv.NC, srv.Client
	rejections := servicetest.Rejections(t, nc, c.Names())

	valid := contracts.BatchSubmission{RunID: "run-same-id", ThreadID: "thread-1", Step: 1,
		Agent:     contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"ask_me", "echo"}},
		Narrowing: contracts.NarrowingConfigured,
		Calls:     []contracts.ToolCall{{CallID: "c1", ToolID: "ask_me", Arguments: json.RawMessage(`{}`)}}}
	type waited struct {
		res *client.BatchResult
		err error
	}
	done := make(chan waited, 1)
	go func() {
		res, err := c.SubmitAndWait(ctx, valid)
		done <- waited{res, err}
	}()
	ticket, err := c.WaitTicket(ctx, valid.RunID, valid.Step, "c1")
	if err != nil {
		t.Fatal(err)
	}

	conflicting := valid
	conflicting.Calls = []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: json.RawMessage(`{"text":"other"}`)}}
	if _, err := c.Submit(ctx, conflicting); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-rejections:
		if r.Code != string(contracts.RejectConflict) || r.BatchID != valid.BatchID() || r.EventID != client.SubmissionEventID(conflicting) {
			t.Fatalf("rejection %+v, want a conflict of %s under the conflicting submission's event id %s",
				r, valid.BatchID(), client.SubmissionEventID(conflicting))
		}
	case <-ctx.Done():
		t.Fatal("the conflicting submission was not rejected")
	}
	// SubmitAndWait saw that rejection (its subscription was in place before its own
	// submission); it must still be waiting for the approval.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(ctx, ticket, "ok"); err != nil {
		t.Fatal(err)
	}
	var w waited
	select {
	case w = <-done:
	case <-ctx.Done():
		t.Fatal("SubmitAndWait did not return")
	}
	if w.err != nil {
		var rej *client.RejectedError
		if errors.As(w.err, &rej) {
			t.Fatalf("the accepted batch was reported rejected: %+v", rej.BatchRejected)
		}
		t.Fatal(w.err)
	}
	if w.res.BatchID != valid.BatchID() || len(w.res.Results) != 1 || w.res.Results[0].ToolID != "ask_me" ||
		w.res.Results[0].Outcome != contracts.OutcomeCompleted {
		t.Fatalf("results %+v, want the approved ask_me", w.res)
	}
}
