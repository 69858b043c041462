package contracts_test

import (
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestToolAnnotationsDefaults applies the MCP specification's defaults to absent hints:
// readOnly false, destructive true, idempotent false, openWorld true.
func TestToolAnnotationsDefaults(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name       string
		a          contracts.ToolAnnotations
		behavior   contracts.PolicyBehavior
		replaySafe bool
	}{
		{"nothing declared: destructive by default", contracts.ToolAnnotations{}, contracts.BehaviorAsk, false},
		{"read-only", contracts.ToolAnnotations{ReadOnlyHint: &yes}, contracts.BehaviorAllow, false},
		{"read-only wins over destructive", contracts.ToolAnnotations{ReadOnlyHint: &yes, DestructiveHint: &yes}, contracts.BehaviorAllow, false},
		{"not destructive: no say", contracts.ToolAnnotations{DestructiveHint: &no}, "", false},
		{"idempotent, open world by default", contracts.ToolAnnotations{IdempotentHint: &yes, DestructiveHint: &no}, "", false},
		{"idempotent, closed world", contracts.ToolAnnotations{IdempotentHint: &yes, OpenWorldHint: &no}, contracts.BehaviorAsk, true},
		{"idempotent, open world", contracts.ToolAnnotations{IdempotentHint: &yes, OpenWorldHint: &yes}, contracts.BehaviorAsk, false},
	} {
		if got := tc.a.DefaultBehavior(); got != tc.behavior {
			t.Errorf("%s: behavior %q, want %q", tc.name, got, tc.behavior)
		}
		if got := tc.a.ReplaySafe(); got != tc.replaySafe {
			t.Errorf("%s: replay-safe %t, want %t", tc.name, got, tc.replaySafe)
		}
	}
}

// TestExplainWithDefault: the fallback replaces default_behavior only where no rule
// matches; a host rule, a deny above all, wins; plan still denies unmatched calls.
func TestExplainWithDefault(t *testing.T) {
	p, err := contracts.CompilePolicy(contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorDeny, Rules: []contracts.PolicyRule{
		{Pattern: "ruled", Behavior: contracts.BehaviorDeny},
	}})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id string) contracts.ToolCall {
		return contracts.ToolCall{CallID: "c", ToolID: id, Arguments: []byte(`{}`)}
	}
	if v := p.ExplainWithDefault(call("free"), "corr", contracts.BehaviorAllow).Verdict; v.Kind != contracts.VerdictAllow {
		t.Errorf("unmatched call with fallback allow: %+v", v)
	}
	if v := p.ExplainWithDefault(call("ruled"), "corr", contracts.BehaviorAllow).Verdict; v.Kind != contracts.VerdictDeny {
		t.Errorf("a host rule must win over the fallback: %+v", v)
	}
	if v := p.ExplainWithDefault(call("free"), "corr", "").Verdict; v.Kind != contracts.VerdictDeny {
		t.Errorf("no fallback keeps default_behavior: %+v", v)
	}
	plan, err := contracts.CompilePolicy(contracts.PolicyConfig{Mode: contracts.ModePlan})
	if err != nil {
		t.Fatal(err)
	}
	if v := plan.ExplainWithDefault(call("free"), "corr", contracts.BehaviorAllow).Verdict; v.Kind != contracts.VerdictDeny {
		t.Errorf("plan mode must deny an unmatched call whatever the fallback: %+v", v)
	}
}
