package gate

import (
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// TestApprovalWhilePausedIsAnsweredBlocked: a ticket
// approved while its tool is paused blocks the call with the pause's reason, and the
// answer and the audit say what happened — a deny with that reason — not "approved".
func TestApprovalWhilePausedIsAnsweredBlocked(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_p", "ask_me", `{}`)
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.ToolPausesBucket())
	if err != nil {
		t.Fatal(err)
	}
	pause := contracts.ToolPause{ToolID: "ask_me", Reason: "incident", PausedAt: time.Now().UTC()}
	data := `{"tool_id":"ask_me","reason":"incident","paused_at":"` + pause.PausedAt.Format(time.RFC3339Nano) + `"}`
	if _, err := kv.Put(h.Ctx, contracts.ToolPauseKey("ask_me"), []byte(data)); err != nil {
		t.Fatal(err)
	}
	h.resume("resume-paused", approveAs(tk, "alice", ""))
	a := h.waitAnswer("resume-paused")
	if a.kind != "resolved" || a.res.Code != tickets.ResolvedDenied || !strings.Contains(a.res.Message, pause.BlockReason()) {
		t.Fatalf("answer %+v, want resolved %s naming %q", a, tickets.ResolvedDenied, pause.BlockReason())
	}
	rec := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	if got := outputText(rec); got != contracts.BlockedPrefix+pause.BlockReason() {
		t.Fatalf("output %q", got)
	}
	h.quiet()
	var last *contracts.AuditRecord
	for _, rec := range h.audits() {
		if rec.CallID == "call_p" {
			last = &rec
		}
	}
	if last == nil || last.Decision != contracts.AuditDecisionDeny || !strings.Contains(last.Reason, contracts.ToolPausedCode) || last.Actor != "alice" {
		t.Fatalf("last audit %+v, want deny with the pause's reason by alice", last)
	}
}
