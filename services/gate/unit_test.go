package gate

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// unitService is a gate without a server, for the pure parts: the chain and its caches.
func unitService(t *testing.T) *Service {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	s, err := newService(DepsOf(&pipeline.Env{Config: cfg, Names: cfg.Names(), Log: zerolog.Nop(), Now: time.Now}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func unitBatch(s *Service, mod func(*contracts.BatchSubmission), calls ...contracts.ToolCall) *contracts.BatchRecord {
	sub := contracts.BatchSubmission{RunID: "run-u", ThreadID: "t", Step: 4,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo", "ask_me", "later", "forbidden", "stub", "client_pick"}},
		Calls: calls}
	if mod != nil {
		mod(&sub)
	}
	b := &contracts.BatchRecord{Submission: sub}
	for _, c := range calls {
		b.Pinned = append(b.Pinned, s.env.Config.Pin(c.ToolID))
	}
	return b
}

// TestDecideChain pins the chain's order and its hardening, one decision per row.
func TestDecideChain(t *testing.T) {
	s := unitService(t)
	runPolicy := func(def contracts.PolicyBehavior, rules ...contracts.PolicyRule) func(*contracts.BatchSubmission) {
		return func(sub *contracts.BatchSubmission) {
			sub.Policy = &contracts.PolicyConfig{DefaultBehavior: def, Rules: rules}
		}
	}
	rows := []struct {
		name    string
		tool    string
		mod     func(*contracts.BatchSubmission)
		kind    contracts.GateOutcomeKind
		reason  string
		corr    string
		client  bool
		unknown bool
	}{
		{name: "host allow", tool: "echo", kind: contracts.GateAllow},
		{name: "host ask gets a permission correlation", tool: "ask_me", kind: contracts.GateRequireConfirmation, corr: "perm.run-u.4.c1"},
		{name: "host schedule gets a scheduled correlation", tool: "later", kind: contracts.GateSchedule, corr: "sched.run-u.4.c1"},
		{name: "host deny", tool: "forbidden", kind: contracts.GateBlock, reason: "tool forbidden denied by policy"},
		{name: "host fixed result", tool: "stub", kind: contracts.GateSetResult},
		{name: "client execution bypasses the gate", tool: "client_pick", client: true,
			mod: func(sub *contracts.BatchSubmission) { sub.Narrowing = contracts.NarrowingDenyAll }},
		{name: "unknown tool", tool: "nosuch", unknown: true,
			mod: func(sub *contracts.BatchSubmission) { sub.Agent.Tools = append(sub.Agent.Tools, "nosuch") }},
		{name: "deny beats unknown", tool: "nosuch", kind: contracts.GateBlock, reason: contracts.DenyAllReason,
			mod: func(sub *contracts.BatchSubmission) { sub.Narrowing = contracts.NarrowingDenyAll }},
		{name: "an unknown narrowing fails closed", tool: "echo", kind: contracts.GateBlock, reason: contracts.DenyAllReason,
			mod: func(sub *contracts.BatchSubmission) { sub.Narrowing = "everything" }},
		{name: "run ask before host schedule", tool: "later", kind: contracts.GateRequireConfirmation, corr: "perm.run-u.4.c1",
			mod: runPolicy(contracts.BehaviorAsk)},
		{name: "run ask cannot turn a host deny into an approval", tool: "forbidden", kind: contracts.GateBlock,
			reason: "tool forbidden denied by policy", mod: runPolicy(contracts.BehaviorAsk)},
		{name: "run plan mode denies what no run rule allows", tool: "echo", kind: contracts.GateBlock,
			reason: "tool echo denied by policy", mod: func(sub *contracts.BatchSubmission) {
				sub.Policy = &contracts.PolicyConfig{Mode: contracts.ModePlan}
			}},
		{name: "run ask on a fixed-result tool parks it", tool: "stub", kind: contracts.GateRequireConfirmation,
			corr: "perm.run-u.4.c1", mod: runPolicy(contracts.BehaviorAsk)},
		{name: "run schedule rule without a delay does not compile", tool: "echo", kind: contracts.GateBlock,
			reason: "invalid run policy: permission policy: rules[0].delay: a schedule rule needs a delay > 0",
			mod:    runPolicy(contracts.BehaviorAllow, contracts.PolicyRule{Pattern: "echo", Behavior: contracts.BehaviorSchedule})},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			s.runPolicies = newPolicyCache(0)
			b := unitBatch(s, row.mod, contracts.ToolCall{CallID: "c1", ToolID: row.tool, Arguments: json.RawMessage(`{}`)})
			d := s.decide(b, 0, nil)
			if d.client != row.client || d.unknown != row.unknown {
				t.Fatalf("decision %+v, want client=%v unknown=%v", d, row.client, row.unknown)
			}
			if row.client || row.unknown {
				if d.outcome != nil {
					t.Fatalf("a %s decision carries outcome %+v", row.name, d.outcome)
				}
				return
			}
			o := d.outcome
			if o == nil || o.Kind != row.kind || o.Reason != row.reason || o.CorrelationID != row.corr {
				t.Fatalf("outcome %+v, want %s reason %q correlation %q", o, row.kind, row.reason, row.corr)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("outcome does not validate: %v", err)
			}
		})
	}
}

// TestRunPolicyCompiledOncePerBatch: every call of a batch shares one compiled run policy,
// a compile error included.
func TestRunPolicyCompiledOncePerBatch(t *testing.T) {
	s := unitService(t)
	bad := func(sub *contracts.BatchSubmission) {
		sub.Policy = &contracts.PolicyConfig{Rules: []contracts.PolicyRule{{Pattern: "echo(", Behavior: contracts.BehaviorAllow}}}
	}
	b := unitBatch(s, bad, contracts.ToolCall{CallID: "c1", ToolID: "echo", Arguments: json.RawMessage(`{}`)},
		contracts.ToolCall{CallID: "c2", ToolID: "echo", Arguments: json.RawMessage(`{}`)})
	for i := range 2 {
		if d := s.decide(b, i, nil); d.outcome == nil || d.outcome.Kind != contracts.GateBlock {
			t.Fatalf("call %d: %+v, want blocked", i, d)
		}
	}
	if n := s.runPolicies.len(); n != 1 {
		t.Errorf("%d cached policies, want 1", n)
	}
}

func TestPolicyCacheEvictsOldest(t *testing.T) {
	c := newPolicyCache(2)
	cfg := contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorAllow}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.get(k, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if c.len() != 2 {
		t.Fatalf("len %d, want 2", c.len())
	}
	if _, ok := c.byKey["a"]; ok {
		t.Error("oldest entry not evicted")
	}
	_, err := c.get("d", contracts.PolicyConfig{DefaultBehavior: "sometimes"})
	var pe *contracts.PolicyError
	if !errors.As(err, &pe) {
		t.Errorf("compile error %v, want a *PolicyError", err)
	}
}
