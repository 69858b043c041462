package batcher_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// rejectionOf waits for the rejection answering the submission with ce-id eventID.
func (h *harness) rejectionOf(eventID string) contracts.BatchRejected {
	h.t.Helper()
	var got *contracts.BatchRejected
	natstest.WaitFor(h.t, waitTimeout, func() bool {
		for _, m := range h.rejections() {
			if r := decode[contracts.BatchRejected](h.t, m.event); r.EventID == eventID {
				got = &r
				return true
			}
		}
		return false
	}, "the rejection of "+eventID)
	return *got
}

// noBatch asserts that (run, step) has no batch record.
func (h *harness) noBatch(run string, step int64) {
	h.t.Helper()
	if _, _, err := h.env.Batches.Get(h.ctx, contracts.BatchKey(run, step)); !errors.Is(err, state.ErrNotFound) {
		h.t.Errorf("batch %s is stored (err %v), want nothing of the refused submission", contracts.BatchID(run, step), err)
	}
}

// TestRunPolicyThatDoesNotCompileIsRejectedAtSubmission: a run policy whose pattern the
// rule grammar refuses is rejected with invalid_policy (naming the rule) before anything
// is stored, instead of being accepted and blocking every call with "invalid run policy".
func TestRunPolicyThatDoesNotCompileIsRejectedAtSubmission(t *testing.T) {
	h := newHarness(t)
	h.start()
	const run = "run-bad-policy"
	sub := submission(run, 1, call("c1", "echo"))
	sub.Policy = &contracts.PolicyConfig{Rules: []contracts.PolicyRule{{Pattern: `echo(text =~ "x")`, Behavior: contracts.BehaviorAllow}}}
	seq := h.submit("bad-policy-1", sub)
	h.waitSettled(h.env.Names.SubmissionsStream(), contracts.ConsumerBatcherSubmit, seq)

	got := h.rejectionOf("bad-policy-1")
	if got.Code != string(contracts.RejectInvalidPolicy) || got.RunID != run || got.BatchID != sub.BatchID() ||
		!strings.Contains(got.Message, "rules[0].pattern") {
		t.Errorf("rejection %+v, want invalid_policy for %s naming rules[0].pattern", got, sub.BatchID())
	}
	h.noBatch(run, 1)
	if n := len(h.gateRequests(run)); n != 0 {
		t.Errorf("%d gate requests, want none", n)
	}
}
