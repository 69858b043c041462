package e2e_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// shortRetention is the run retention of these tests: records of finished runs expire
// after it, the run record after twice it.
const shortRetention = 2 * time.Second

// retentionHarness is the stack with the run retention shortened to r.
func retentionHarness(t *testing.T, r time.Duration) *harness {
	cfg := exampleConfig(t)
	cfg.Retention = config.Retention{Runs: r.String()}
	return newHarness(t, withConfig(cfg))
}

// runTraces counts what the buckets hold of run, per bucket: every stored message on a
// key of the run (values, older revisions, delete and expiry markers alike).
func (h *harness) runTraces(run string) map[string]uint64 {
	h.tb.Helper()
	_, js := h.srv.Conn(h.tb)
	ctx := ctxFor(h.tb, 10*time.Second)
	n := h.cfg.Names()
	out := map[string]uint64{}
	// Every partition's buckets: a run's records are in its partition's alone.
	buckets := map[string]string{n.TicketsBucket(): "*." + contracts.RunKey(run) + ".*.*"}
	for _, pn := range n.EachPartition() {
		buckets[pn.RunsBucket()] = contracts.RunKey(run)
		buckets[pn.BatchesBucket()] = contracts.RunKey(run) + ".*"
		buckets[pn.CallsBucket()] = "*." + contracts.RunKey(run) + ".*.*"
	}
	for bucket, keys := range buckets {
		st, err := js.Stream(ctx, contracts.RecordStream(bucket))
		if err != nil {
			h.tb.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(contracts.RecordSubject(bucket, keys)))
		if err != nil {
			h.tb.Fatal(err)
		}
		for _, c := range info.State.Subjects {
			out[bucket] += c
		}
	}
	return out
}

// waitGone waits until the buckets hold nothing of run.
func (h *harness) waitGone(run string) {
	h.tb.Helper()
	natstest.WaitFor(h.tb, 60*time.Second, func() bool {
		for _, c := range h.runTraces(run) {
			if c > 0 {
				return false
			}
		}
		return true
	}, fmt.Sprintf("every record of run %s gone from the runs, batches, calls and tickets buckets", run))
}

// TestRetention_finishedRunsLeaveNothingBehindLiveOnesStay: with a 2 s run retention, a
// finished run's run, batch, call and ticket records (the resolved ticket's too) are all
// gone from the buckets a few seconds after it finished, while a run parked on an
// approval — its open batch, its call records and its open ticket — is kept past twice
// the retention; once approved and finished, it goes too. Once the records are gone, a
// cancel of the run records only its end (which expires in turn), and a resume of the
// ticket is refused with not_waiting.
func TestRetention_finishedRunsLeaveNothingBehindLiveOnesStay(t *testing.T) {
	h := retentionHarness(t, shortRetention)
	const parked, done = "ret-parked", "ret-done"
	ticket := h.parkedAt(parked)
	parkedAt := time.Now()

	h.mustRun(batch(done, 1, []string{"echo"}, call("a", "echo", map[string]any{"text": "one"}),
		call("b", "echo", map[string]any{"text": "two"})))
	h.mustRun(batch(done, 2, []string{"echo"}, call("c", "echo", map[string]any{"text": "three"})))
	if left := h.runTraces(done); left[h.cfg.Names().CallsBucket()] == 0 || left[h.cfg.Names().RunsBucket()] == 0 {
		t.Fatalf("records of the finished run right after it finished: %v, want its calls and run record", left)
	}
	h.waitGone(done)

	// A cancel of the run once its records are gone records the run as cancelled again
	// (it refuses new batches), seals nothing, and that record expires as well.
	if _, err := h.client.CancelRun(ctxFor(t, 30*time.Second), done, "late"); err != nil {
		t.Fatal(err)
	}
	if rec, _, err := h.stack.Env.Runs.Get(ctxFor(t, 10*time.Second), contracts.RunKey(done)); err == nil &&
		(rec.Batch != nil || rec.Ended == nil || rec.Ended.Reason != contracts.RunEndCancelled) {
		t.Errorf("run record after a late cancel: %+v, want only the end", rec)
	}
	h.waitGone(done)

	if waited := time.Since(parkedAt); waited <= 2*shortRetention {
		t.Fatalf("the parked run was only %s old when the finished one was gone", waited)
	}
	ctx := ctxFor(t, 30*time.Second)
	run, _, err := h.stack.Env.Runs.Get(ctx, contracts.RunKey(parked))
	if err != nil || run.ActiveStep == nil || run.Holds(1) == nil || run.Holds(1).Phase != contracts.BatchPhaseOpen {
		t.Fatalf("run record of the parked run past the retention: %+v (%v), want its batch open", run, err)
	}
	for _, id := range []string{"c1", "c2"} {
		if _, _, err := h.stack.Env.Calls.Get(ctx, h.callKey(parked, 1, id)); err != nil {
			t.Errorf("call %s of the parked batch past the retention: %v", id, err)
		}
	}
	if _, _, err := h.stack.Env.Tickets.Get(ctx, ticket.CorrelationID); err != nil {
		t.Fatalf("open ticket past the retention: %v", err)
	}

	if _, err := h.client.Approve(ctx, ticket, "go"); err != nil {
		t.Fatal(err)
	}
	h.wantResults(ctx, parked, "before|ran ask_me|1")
	h.waitGone(parked)

	// A resume of the ticket once its records are gone: not_waiting, and nothing comes back.
	_, err = h.client.Approve(ctx, ticket, "again")
	var rr *client.ResumeRejectedError
	if !errors.As(err, &rr) || rr.Code != string(contracts.ResumeNotWaiting) {
		t.Errorf("approve after the records expired: %v, want not_waiting", err)
	}
	if left := h.runTraces(parked); left[h.cfg.Names().CallsBucket()]+left[h.cfg.Names().TicketsBucket()] != 0 {
		t.Errorf("records after a late resume: %v, want none", left)
	}
}

// TestRetention_aFinishedBatchIsNeverRunAgain: the exactly-once window across retention
// (docs/protocol.md, "Exactly once across retention"). Once the records of a finished
// batch are gone, an identical resubmission of a step the run went past is refused with
// stale_step and runs nothing; the run's last batch, which the run record (the run's
// exactly-once marker) still holds, stays a no-op until the marker expires too, one
// retention later; after that the run id is unknown and a submission under it is a new
// run. A cancel or a resolution of a call whose records are gone changes nothing (no
// record comes back).
// The retention is longer here: the checks between the sweep and the marker's expiry must
// fit in one retention on a loaded machine.
func TestRetention_aFinishedBatchIsNeverRunAgain(t *testing.T) {
	h := retentionHarness(t, 5*time.Second)
	const run = "ret-once"
	first := batch(run, 1, []string{"echo"}, call("a", "echo", map[string]any{"text": "one"}))
	second := batch(run, 2, []string{"echo"}, call("b", "echo", map[string]any{"text": "two"}))
	h.mustRun(first)
	h.mustRun(second)
	ctx := ctxFor(t, 60*time.Second)
	n := h.cfg.Names()

	// The batches' archives expire (their markers stay, as long as the run record may hold
	// a batch) and their calls are swept; the run record remains.
	archived := func(step int64) bool {
		_, _, err := h.stack.Env.Batches.Get(ctx, contracts.BatchKey(run, step))
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	natstest.WaitFor(t, 60*time.Second, func() bool {
		return !archived(1) && !archived(2) && h.runTraces(run)[n.CallsBucket()] == 0
	}, "the archives and call records of both batches gone")
	if _, _, err := h.stack.Env.Runs.Get(ctx, contracts.RunKey(run)); err != nil {
		t.Fatalf("run record one retention after the run finished: %v, want it kept as the marker", err)
	}

	rej := h.resubmit("again-1", first)
	if rej == nil || rej.Code != string(contracts.RejectStaleStep) || rej.BatchID != first.BatchID() {
		t.Fatalf("resubmission of step 1 after its records expired: %+v, want stale_step", rej)
	}
	if rej := h.resubmit("again-2", second); rej != nil {
		t.Fatalf("resubmission of the run's last batch while the marker holds it: rejected %+v, want a no-op", rej)
	}
	if a, b := h.ledger(run, 1, "a"), h.ledger(run, 2, "b"); a != 1 || b != 1 {
		t.Fatalf("bodies ran %d and %d times, want once each", a, b)
	}
	h.command(n.ControlStream(), contracts.ConsumerGateControl, n.CallCancelSubject(), "cancel-b", contracts.TypeCallCancel,
		contracts.CallCancel{OperationID: contracts.OperationID(run, 2, "b"), Actor: "ops:ana", Reason: "late"})
	if left := h.runTraces(run); left[n.CallsBucket()] != 0 {
		t.Fatalf("a call cancel after the call's records expired wrote %d call record revisions, want none", left[n.CallsBucket()])
	}
	h.command(n.ControlStream(), contracts.ConsumerGateControl, n.CallResolveSubject(), "resolve-a", contracts.TypeCallResolve,
		contracts.CallResolve{OperationID: contracts.OperationID(run, 1, "a"), Outcome: contracts.ReconcileNotRun, Note: "late", Actor: "ops:ana", Role: "operator"})
	if left := h.runTraces(run); left[n.CallsBucket()] != 0 {
		t.Fatalf("a call resolution after the call's records expired wrote %d call record revisions, want none", left[n.CallsBucket()])
	}
	if _, _, err := h.stack.Env.Runs.Get(ctx, contracts.RunKey(run)); err != nil {
		t.Fatalf("run record gone before the checks above ended (%v): the machine was too slow for the retention", err)
	}

	// Past the marker, the run id is forgotten: the same batch is a new run's first batch.
	h.waitGone(run)
	if rej := h.resubmit("again-3", first); rej != nil {
		t.Fatalf("submission under a forgotten run id: rejected %+v, want a new run", rej)
	}
	// (The results stream keeps the first run's results longer: wait on the body itself.)
	natstest.WaitFor(t, 60*time.Second, func() bool { return h.ledger(run, 1, "a") == 2 },
		"step 1 of the new run under the forgotten id to run (twice in all)")
}

// command publishes an operator's command (a CloudEvent of type typ with payload v, id
// eventID) on subject and waits until durable on stream has settled it.
func (h *harness) command(stream, durable, subject, eventID, typ string, v any) {
	h.tb.Helper()
	ctx := ctxFor(h.tb, 60*time.Second)
	ev, err := cloudevent.NewEvent(eventID, "test/operator", typ, v)
	if err != nil {
		h.tb.Fatal(err)
	}
	_, js := h.srv.Conn(h.tb)
	ack, err := js.PublishMsg(ctx, cloudevent.EncodeMsg(subject, ev))
	if err != nil {
		h.tb.Fatal(err)
	}
	h.waitSettled(stream, durable, ack.Sequence)
}

// waitSettled waits until durable on stream has acknowledged every message up to seq.
func (h *harness) waitSettled(stream, durable string, seq uint64) {
	h.tb.Helper()
	ctx := ctxFor(h.tb, 60*time.Second)
	_, js := h.srv.Conn(h.tb)
	natstest.WaitFor(h.tb, 60*time.Second, func() bool {
		c, err := js.Consumer(ctx, stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= seq
	}, fmt.Sprintf("%s to settle stream sequence %d", durable, seq))
}

// resubmit publishes sub under the CloudEvent id eventID, waits until the batcher has
// settled it and returns its rejection, or nil when it was accepted or found recorded.
func (h *harness) resubmit(eventID string, sub contracts.BatchSubmission) *contracts.BatchRejected {
	h.tb.Helper()
	ctx := ctxFor(h.tb, 60*time.Second)
	ev, err := cloudevent.NewEvent(eventID, "test/platform", contracts.TypeBatchRequested, sub)
	if err != nil {
		h.tb.Fatal(err)
	}
	_, js := h.srv.Conn(h.tb)
	n := h.cfg.Names()
	ack, err := js.PublishMsg(ctx, cloudevent.EncodeMsg(n.SubmitSubject(), ev))
	if err != nil {
		h.tb.Fatal(err)
	}
	h.waitSettled(n.SubmissionsStream(), contracts.ConsumerBatcherSubmit, ack.Sequence)
	for _, m := range servicetest.ReadStored(h.tb, ctx, js, n.SubmissionsStream(), n.RejectedSubject(), false) {
		r := servicetest.Decode[contracts.BatchRejected](h.tb, m.Event)
		if r.EventID == eventID {
			return &r
		}
	}
	return nil
}
