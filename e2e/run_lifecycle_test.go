package e2e_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// submitAs publishes sub under the CloudEvent id eventID (a resubmission under a new id,
// past the stream's duplicate window for the first one).
func (h *harness) submitAs(eventID string, sub contracts.BatchSubmission) {
	h.tb.Helper()
	ev, err := cloudevent.NewEvent(eventID, "test/platform", contracts.TypeBatchRequested, sub)
	if err != nil {
		h.tb.Fatal(err)
	}
	_, js := h.srv.Conn(h.tb)
	if _, err := js.PublishMsg(ctxFor(h.tb, 10*time.Second), cloudevent.EncodeMsg(h.cfg.Names().SubmitSubject(), ev)); err != nil {
		h.tb.Fatal(err)
	}
}

// rejectedWith submits sub and requires its rejection with code, naming the batch and
// run, with nothing of it stored.
func (h *harness) rejectedWith(sub contracts.BatchSubmission, code contracts.RejectCode) {
	h.tb.Helper()
	_, err := h.client.SubmitAndWait(ctxFor(h.tb, 60*time.Second), sub)
	var rej *client.RejectedError
	if !errors.As(err, &rej) || rej.Code != string(code) || rej.BatchID != sub.BatchID() || rej.RunID != sub.RunID {
		h.tb.Fatalf("submission of %s: %v, want a %s rejection naming the batch and the run", sub.BatchID(), err, code)
	}
	if _, err := pipeline.ReadBatch(ctxFor(h.tb, 5*time.Second), h.stack.Env.Runs, h.stack.Env.Batches, sub.RunID, sub.Step, true); !errors.Is(err, state.ErrNotFound) {
		h.tb.Errorf("batch %s is stored (%v), want nothing of the refused submission", sub.BatchID(), err)
	}
}

// TestRunBusy_aSecondStepWaitsForTheFirstToBePublished: step 1 parks on ask_me; step 2
// of the same run (a second agent loop on the run) is refused with run_busy and nothing
// of it runs; once step 1 is approved and published, step 2 sent again under a new ce-id
// is accepted and runs.
func TestRunBusy_aSecondStepWaitsForTheFirstToBePublished(t *testing.T) {
	h := newHarness(t)
	const run = "run-busy"
	ticket := h.parkedAt(run)
	second := batch(run, 2, []string{"echo"}, call("s2", "echo", map[string]any{"text": "step two"}))
	h.rejectedWith(second, contracts.RejectRunBusy)
	if n := h.ledger(run, 2, "s2"); n != 0 {
		t.Fatalf("the refused step ran its tool %d times", n)
	}

	ctx := ctxFor(t, 60*time.Second)
	if _, err := h.client.Approve(ctx, ticket, "go"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Await(ctx, run, 1); err != nil {
		t.Fatal(err)
	}
	h.submitAs(second.BatchID()+":again", second)
	res, err := h.client.Await(ctx, run, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(res); len(got) != 1 || got[0] != "step two" {
		t.Errorf("step 2 results %q, want [step two]", got)
	}
}

// TestRunCancelled_laterSubmissionsAreRefused: once a run is cancelled, its next batch is
// refused with run_cancelled and runs nothing.
func TestRunCancelled_laterSubmissionsAreRefused(t *testing.T) {
	h := newHarness(t)
	const run = "run-cancelled"
	h.mustRun(batch(run, 1, []string{"echo"}, call("c1", "echo", map[string]any{"text": "one"})))
	ctx := ctxFor(t, 60*time.Second)
	// CancelRun returns once the run has ended: the next step, submitted at once, is refused.
	ended, err := h.client.CancelRun(ctx, run, "stop")
	if err != nil || ended.Reason != contracts.RunEndCancelled {
		t.Fatalf("CancelRun: %+v %v", ended, err)
	}
	second := batch(run, 2, []string{"echo"}, call("c2", "echo", map[string]any{"text": "two"}))
	h.rejectedWith(second, contracts.RejectRunCancelled)
	if n := h.ledger(run, 2, "c2"); n != 0 {
		t.Fatalf("a batch of a cancelled run ran its tool %d times", n)
	}
}

// TestRunCancelled_stopsTheBodyInFlight: a call of `slow` that would sleep 30 seconds is
// running when its run is cancelled; brain-exec cancels the body's context, so its handler
// settles the executor request well before the 30 seconds (never a tight timing: < 10 s),
// and the call's published outcome is indeterminate "cancelled".
func TestRunCancelled_stopsTheBodyInFlight(t *testing.T) {
	h := newHarness(t)
	const run = "run-cancel-slow"
	ctx := ctxFor(t, 60*time.Second)
	if _, err := h.client.Submit(ctx, batch(run, 1, []string{"slow"}, call("c1", "slow", map[string]any{"ms": 30000}))); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, 30*time.Second, func() bool {
		rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(run, 1, "c1"))
		return err == nil && rec.Entered
	}, "the slow body entered")
	cancelledAt := time.Now()
	if err := h.client.Cancel(ctx, run, "stop"); err != nil {
		t.Fatal(err)
	}
	_, js := h.srv.Conn(t)
	natstest.WaitFor(t, 30*time.Second, func() bool {
		c, err := js.Consumer(ctx, h.cfg.Names().CallRecordsStream(), contracts.ConsumerBrainExec)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.Delivered.Stream > 0 && info.NumAckPending == 0
	}, "brain-exec to settle the slow call's request")
	if d := time.Since(cancelledAt); d > 10*time.Second {
		t.Fatalf("the body ended %s after the cancel, want well before its 30 s", d)
	}
	res, err := h.client.Await(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Outcome != contracts.OutcomeIndeterminate || !strings.Contains(r.Output.Text(), "cancelled") {
		t.Errorf("result %s %q, want indeterminate: cancelled", r.Outcome, r.Output.Text())
	}
}
