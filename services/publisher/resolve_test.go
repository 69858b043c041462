package publisher_test

import (
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/publisher"
)

// TestResolutionBetweenReadAndFinalize: an operator's resolution of an indeterminate call
// recorded on the open batch after the barrier read the batch and its calls, and before
// the finalize, is in the published results — the finalize's compare-and-swap on the run
// record sees it and the results are built again from the finalized batch. The call
// record itself is still Indeterminate (the gate moves it after recording on the batch).
// A resolution after the finalize is refused by the batch (it becomes a correction).
func TestResolutionBetweenReadAndFinalize(t *testing.T) {
	h := newHarness(t)
	sub := submission("run-resolve-race", 1, call("c0", "echo"), call("c1", "echo"))
	h.createBatch(sub, false)
	h.setCall(sub, 0, contracts.IndeterminatePhase("executor_lost"))
	h.setCall(sub, 1, completed("c1", "ok"))
	resolved := contracts.TextOutput("c0", "sent, checked by hand")
	record := func(command string) error {
		_, _, err := h.Env.Runs.Update(h.Ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, _ bool) error {
			_, err := cur.Holds(sub.Step).RecordResolution(contracts.BatchResolution{
				Index: 0, CallID: "c0", CommandID: command, Output: resolved,
			})
			return err
		})
		return err
	}
	h.OnFault(publisher.FaultBeforeFinalize, sub.BatchID(), func(hit int) {
		if hit == 1 {
			if err := record("resolve-1"); err != nil {
				t.Errorf("record the resolution: %v", err)
			}
		}
	})
	h.settled(h.announce(sub, 1, false, "1"))
	waitPhase(h, sub, contracts.BatchPhasePublished)

	pubs := h.publications(t, sub.RunID)
	if len(pubs) != 1 || len(pubs[0].results) != 2 {
		t.Fatalf("publications = %+v, want one of 2 results", pubs)
	}
	r := pubs[0].results[0]
	if r.Outcome != contracts.OutcomeCompleted || r.Output.Text() != resolved.Text() || r.Output.IsError {
		t.Fatalf("resolved call published as %s %q, want completed %q", r.Outcome, r.Output.Text(), resolved.Text())
	}
	archived, _, err := h.Env.Batches.Get(h.Ctx, contracts.BatchKey(sub.RunID, sub.Step))
	if err != nil {
		t.Fatal(err)
	}
	if res, ok := archived.Resolved(0); !ok || res.CommandID != "resolve-1" {
		t.Errorf("archived batch resolutions = %+v, want the operator's", archived.Resolutions)
	}
	// The batch is finalized (and published): a resolution now is not the batch's.
	if err := record("resolve-2"); err == nil {
		t.Error("a second resolution was recorded on the finalized batch")
	}
}
