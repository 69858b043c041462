package gate

import (
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestSandboxToolWhileSandboxDisabledIsNonRecoverable: with the sandbox executor disabled,
// a sandbox tool's capability is non_recoverable (reference §1.6: no sandbox executor
// wired), so its replay_safe pin is unsupported and the call completes with that error
// before any executor is entered — instead of being dispatched as replayable.
func TestSandboxToolWhileSandboxDisabledIsNonRecoverable(t *testing.T) {
	h := newHarness(t, withoutService())
	h.env.Config.Executors.Sandbox.Enabled = false
	h.start(4)

	b := h.store(h.submission(1, call("call_wc", "wc", `{"text":"a b"}`)))
	h.gate(b, 0)
	rec := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	if got := outputText(rec); !strings.Contains(got, "unsupported recovery mode") || !strings.Contains(got, string(contracts.CapabilityNonRecoverable)) {
		t.Fatalf("output %q, want the replay_safe pin refused against non_recoverable", got)
	}
	h.quiet()
	if n := len(h.execRequests()); n != 0 {
		t.Fatalf("%d executor requests, want none: the sandbox capability is non_recoverable", n)
	}
}

// TestCancelledRunIsEnded: a cancellation ends the run on its run record (so the batcher
// refuses its later batches with run_cancelled), also for a run with no open batch.
func TestCancelledRunIsEnded(t *testing.T) {
	h := newHarness(t)
	const run = "run-cancel-ends"
	h.cancelRun(h.uniq("cancel"), run)
	var rec contracts.RunRecord
	natstest.WaitFor(t, waitLong, func() bool {
		r, _, err := h.env.Runs.Get(h.ctx, contracts.RunKey(run))
		rec = r
		return err == nil && r.Ended != nil
	}, "the run record ended")
	if rec.Ended.Reason != contracts.RunEndCancelled {
		t.Fatalf("run ended %+v, want cancelled", rec.Ended)
	}
	if rej := rec.RejectionForNewBatch(2); rej == nil || rej.Code != contracts.RejectRunCancelled {
		t.Errorf("a later batch is refused with %v, want run_cancelled", rej)
	}
}
