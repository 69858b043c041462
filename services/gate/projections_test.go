package gate

import (
	"slices"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
)

// TestProjectionsAreOffThePath: the audit record and the tool_call fact are copies of the
// decision the call record already holds durably, so the executor request does not wait
// on them — with the audit stream unable to store anything, the request still goes out
// (a failure the gate input's redelivery repairs) — and they are complete all the
// same: once the stream is back, the redelivered request stores the audit copy, and
// nothing downstream happens twice.
func TestProjectionsAreOffThePath(t *testing.T) {
	h := newHarness(t)
	n := h.Env.Names
	b := h.store(h.submission(1, call("call_1", "echo", `{}`)))
	audit, err := h.JS.Stream(h.Ctx, n.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := audit.CachedInfo().Config
	if err := h.JS.DeleteStream(h.Ctx, n.AuditStream()); err != nil {
		t.Fatal(err)
	}
	h.gate(b, 0)
	natstest.WaitFor(t, waitLong, func() bool { return len(h.execRequests()) == 1 },
		"the executor request while the audit stream is gone")
	if rec := h.mustCall(b, 0); rec.Decision == nil || rec.Decision.AuditLabel() != "allow" {
		t.Fatalf("call record %+v: the decision is not durable with its audit data", rec)
	}
	if _, err := h.JS.CreateStream(h.Ctx, cfg); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, waitLong, func() bool { return slices.Equal(h.auditsOf("call_1"), []string{"allow"}) },
		"the audit copy once the stream is back")
	h.quiet()
	if got := h.auditsOf("call_1"); !slices.Equal(got, []string{"allow"}) {
		t.Errorf("audit decisions %v, want one allow", got)
	}
	if n := len(h.execRequests()); n != 1 {
		t.Errorf("%d executor requests, want 1", n)
	}
}
