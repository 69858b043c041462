package gatechain

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const chainConfig = `
tools:
  - { id: echo }
  - { id: stub, set_result: { text: fixed } }
  - { id: later }
policy:
  default_behavior: deny
  rules:
    - { pattern: echo, behavior: allow }
    - { pattern: stub, behavior: allow }
    - { pattern: echo, behavior: deny, shadow: true }
    - { pattern: stub, behavior: ask, shadow: true }
    - { pattern: ghost, behavior: allow, shadow: true }
    - { pattern: later, behavior: schedule, delay: 1h, action_kind: email, shadow: true }
`

// TestShadowFindingsGoThroughTheWholeChain: a shadow rule's would-be outcome is what the
// rest of the chain makes of it, with the precedence it would have live — a shadow ask as
// specific as a live allow that comes first still yields the allow's fixed result, an
// allow of a tool nobody registered would be an unknown tool, a schedule of an action kind
// the run may not perform would bind the run, and a run policy's shadow rule is composed
// with the host's outcome. None changes the decision.
func TestShadowFindingsGoThroughTheWholeChain(t *testing.T) {
	cfg, err := config.Parse([]byte(chainConfig))
	if err != nil {
		t.Fatal(err)
	}
	host, err := contracts.CompilePolicy(cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	chain := Chain{Config: cfg, Host: host}
	sub := contracts.BatchSubmission{RunID: "r", ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo", "stub", "ghost", "later"}},
		Calls: []contracts.ToolCall{
			{CallID: "c1", ToolID: "echo", Arguments: json.RawMessage(`{}`)},
			{CallID: "c2", ToolID: "stub", Arguments: json.RawMessage(`{}`)},
			{CallID: "c3", ToolID: "ghost", Arguments: json.RawMessage(`{}`)},
			{CallID: "c4", ToolID: "later", Arguments: json.RawMessage(`{}`)},
		},
		Policy: &contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorAllow, Rules: []contracts.PolicyRule{
			{Pattern: "echo", Behavior: contracts.BehaviorAsk, Shadow: true}}},
	}
	b := &contracts.BatchRecord{Submission: sub}
	for _, c := range sub.Calls {
		b.Pinned = append(b.Pinned, cfg.Pin(c.ToolID))
	}
	runPolicy, err := contracts.CompilePolicy(*sub.Policy)
	if err != nil {
		t.Fatal(err)
	}
	run := RunPolicy{Policy: runPolicy}

	cases := []struct {
		kind   contracts.GateOutcomeKind
		shadow []contracts.ShadowFinding
	}{
		{contracts.GateAllow, []contracts.ShadowFinding{
			{Policy: "host", Rule: "echo", Index: 2, Would: "deny", Reason: "tool echo denied by policy"},
			{Policy: "run", Rule: "echo", Index: 0, Would: "ask"},
		}},
		// As specific as the live allow, which comes first and so still wins: the shadow
		// ask changes nothing, and the allow is the host's fixed result.
		{contracts.GateSetResult, []contracts.ShadowFinding{{Policy: "host", Rule: "stub", Index: 3, Would: "set_result"}}},
		{contracts.GateBlock, []contracts.ShadowFinding{{Policy: "host", Rule: "ghost", Index: 4, Would: WouldUnknownTool}}},
		{contracts.GateBlock, []contracts.ShadowFinding{{Policy: "host", Rule: "later", Index: 5, Would: WouldCapabilityBound,
			Reason: `capability_bound: action kind "email" is not permitted for run r`}}},
	}
	for i, c := range cases {
		d := chain.Decide(b, i, nil, run)
		if d.Outcome == nil || d.Outcome.Kind != c.kind {
			t.Errorf("call %d: decided %+v, want %s", i, d, c.kind)
			continue
		}
		if !reflect.DeepEqual(d.Outcome.Shadow, c.shadow) {
			t.Errorf("call %d: shadow\n got %+v\nwant %+v", i, d.Outcome.Shadow, c.shadow)
		}
	}
	if o := chain.Policies(b, sub.Calls[0], run); o.Kind != contracts.GateAllow || o.Shadow != nil {
		t.Errorf("Policies(echo) = %+v, want allow without findings (edits are gated without them)", o)
	}
}
