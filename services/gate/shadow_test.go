package gate

import (
	"github.com/awaken-dev/awaken/internal/servicetest"
	"reflect"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestShadowRulesChangeNothingButTheAudit: shadow rules of the host and of the run policy
// never change a decision — a shadow deny of echo leaves the call running (Executing, its
// executor request published), a shadow ask of forbidden leaves it blocked — while the
// audit record of each decision says what every matching shadow rule would have done with
// it in force: the shadow deny would deny, the run's shadow ask would ask, and a shadow
// allow under a live deny would still deny (a live deny is absolute). The findings are
// recorded on the call's decision, so the audit copy carries the same ones.
func TestShadowRulesChangeNothingButTheAudit(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	live := len(h.Env.Config.Policy.Rules)
	h.Env.Config.Policy.Rules = append(h.Env.Config.Policy.Rules,
		contracts.PolicyRule{Pattern: "echo", Behavior: contracts.BehaviorDeny, Shadow: true},
		contracts.PolicyRule{Pattern: "forbidden", Behavior: contracts.BehaviorAllow, Shadow: true},
		contracts.PolicyRule{Pattern: "counter", Behavior: contracts.BehaviorAsk, Shadow: true},
	)
	h.StartReplica()

	sub := h.submission(1, call("c_echo", "echo", `{"text":"hi"}`), call("c_forbidden", "forbidden", `{}`))
	sub.Policy = &contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorAllow, Rules: []contracts.PolicyRule{
		{Pattern: "echo", Behavior: contracts.BehaviorAsk, Shadow: true},
	}}
	b := h.store(sub)

	h.gate(b, 0)
	echo := h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	if echo.Decision == nil || echo.Decision.Kind != contracts.GateAllow {
		t.Fatalf("echo decided %+v, want allow: a shadow deny changes nothing", echo.Decision)
	}
	natstest.WaitFor(t, waitLong, func() bool { return len(h.execRequests()) == 1 }, "echo's executor request")

	h.gate(b, 1)
	forbidden := h.waitCall(b, 1, "completed", isPhase(contracts.PhaseCompleted))
	if forbidden.Decision == nil || forbidden.Decision.Kind != contracts.GateBlock {
		t.Fatalf("forbidden decided %+v, want block: a shadow allow changes nothing", forbidden.Decision)
	}

	deny := "tool echo denied by policy"
	want := map[string][]contracts.ShadowFinding{
		"c_echo": {
			{Policy: contracts.ShadowPolicyHost, Rule: "echo", Index: live, Would: contracts.AuditDecisionDeny, Reason: deny},
			{Policy: contracts.ShadowPolicyRun, Rule: "echo", Index: 0, Would: contracts.AuditDecisionAsk},
		},
		"c_forbidden": {
			{Policy: contracts.ShadowPolicyHost, Rule: "forbidden", Index: live + 1, Would: contracts.AuditDecisionDeny, Reason: "tool forbidden denied by policy"},
		},
	}
	wantDecision := map[string]string{"c_echo": contracts.AuditDecisionAllow, "c_forbidden": contracts.AuditDecisionDeny}
	var audits []contracts.AuditRecord
	natstest.WaitFor(t, waitLong, func() bool { audits = h.audits(); return len(audits) == 2 }, "two audit records")
	for _, a := range audits {
		if a.Decision != wantDecision[a.CallID] {
			t.Errorf("%s audited %q, want %q", a.CallID, a.Decision, wantDecision[a.CallID])
		}
		if !reflect.DeepEqual(a.Shadow, want[a.CallID]) {
			t.Errorf("%s shadow findings\n got %+v\nwant %+v", a.CallID, a.Shadow, want[a.CallID])
		}
	}
	if !reflect.DeepEqual(echo.Decision.Shadow, want["c_echo"]) {
		t.Errorf("echo's recorded decision carries %+v, want the audited findings", echo.Decision.Shadow)
	}
}

// TestShadowDenyInAParallelBatchStillRunsEveryCallInParallel: a probe decides every call of
// a parallel-delegation batch in memory; a shadow deny matching one of them neither stops
// the batch from running in parallel nor that call from entering, and the probe's audit of
// that call carries the finding.
func TestShadowDenyInAParallelBatchStillRunsEveryCallInParallel(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	index := len(h.Env.Config.Policy.Rules)
	h.Env.Config.Policy.Rules = append(h.Env.Config.Policy.Rules,
		contracts.PolicyRule{Pattern: `delegate(task = "b")`, Behavior: contracts.BehaviorDeny, Shadow: true})
	h.StartReplica()

	b := h.storeDelegates("a", "b")
	h.probe(b)
	for i := range 2 {
		h.waitCall(b, i, "executing", isPhase(contracts.PhaseExecuting))
	}
	natstest.WaitFor(t, waitLong, func() bool { return len(h.execRequests()) == 2 }, "both executor requests")
	for _, m := range h.execRequests() {
		if req := decodeAs[contracts.ExecRequest](t, m); !req.Parallel {
			t.Errorf("executor request %+v, want parallel", req)
		}
	}
	want := []contracts.ShadowFinding{{Policy: contracts.ShadowPolicyHost, Rule: `delegate(task = "b")`, Index: index,
		Would: contracts.AuditDecisionDeny, Reason: "tool delegate denied by policy"}}
	var audits []contracts.AuditRecord
	natstest.WaitFor(t, waitLong, func() bool { audits = h.audits(); return len(audits) == 2 }, "two audit records")
	for _, a := range audits {
		var w []contracts.ShadowFinding
		if a.CallID == "call_2" {
			w = want
		}
		if a.Decision != contracts.AuditDecisionAllow || !reflect.DeepEqual(a.Shadow, w) {
			t.Errorf("%s audited %q with shadow %+v, want allow with %+v", a.CallID, a.Decision, a.Shadow, w)
		}
	}
}
