package contracts

import (
	"testing"
	"time"
)

func TestAuditLabelPerOutcome(t *testing.T) {
	tests := []struct {
		kind GateOutcomeKind
		want string
	}{
		{GateAllow, "allow"},
		{GateBlock, "deny"},
		{GateSetResult, "set_result"},
		{GateRequireConfirmation, "ask"},
		{GateSchedule, "schedule"},
		{"", "unknown"},
		{"maybe", "unknown"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			if got := (GateOutcome{Kind: tt.kind}).AuditLabel(); got != tt.want {
				t.Fatalf("AuditLabel() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVerdictProjectionPreservesReasonAndCorrelation(t *testing.T) {
	tests := []struct {
		name    string
		verdict ToolPermissionVerdict
		want    GateOutcome
	}{
		{"allow", ToolPermissionVerdict{Kind: VerdictAllow}, GateOutcome{Kind: GateAllow}},
		{"allow drops stray fields", ToolPermissionVerdict{Kind: VerdictAllow, Reason: "r", CorrelationID: "c"}, GateOutcome{Kind: GateAllow}},
		{"deny keeps the reason", ToolPermissionVerdict{Kind: VerdictDeny, Reason: "tool rm denied by policy"},
			GateOutcome{Kind: GateBlock, Reason: "tool rm denied by policy"}},
		{"deny with empty reason", ToolPermissionVerdict{Kind: VerdictDeny}, GateOutcome{Kind: GateBlock}},
		{"confirmation keeps id and timeout", ToolPermissionVerdict{Kind: VerdictRequireConfirmation, CorrelationID: "perm.run-1.3.call-1", Timeout: Duration(time.Minute)},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "perm.run-1.3.call-1", Timeout: Duration(time.Minute)}},
		{"schedule keeps id and delay", ToolPermissionVerdict{Kind: VerdictSchedule, CorrelationID: "sched.run-1.3.call-1", Delay: Duration(2 * time.Second)},
			GateOutcome{Kind: GateSchedule, CorrelationID: "sched.run-1.3.call-1", Delay: Duration(2 * time.Second)}},
		{"unknown verdict blocks", ToolPermissionVerdict{Kind: "perhaps"}, GateOutcome{Kind: GateBlock, Reason: `unknown permission verdict "perhaps"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.verdict.IntoGateOutcome()
			if got.Kind != tt.want.Kind || got.Reason != tt.want.Reason || got.CorrelationID != tt.want.CorrelationID ||
				got.Delay != tt.want.Delay || got.Timeout != tt.want.Timeout || got.Output != nil || got.ActionKind != "" {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("projected outcome does not validate: %v", err)
			}
		})
	}
}

func TestImmediateOutput(t *testing.T) {
	supplied := TextOutput("other", "cached").WithState(Command{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove}})
	tests := []struct {
		name    string
		outcome GateOutcome
		ok      bool
		want    ToolOutput
	}{
		{"block", GateOutcome{Kind: GateBlock, Reason: DenyAllReason}, true, ErrorOutput("c1", "blocked: tools are disabled for this Run")},
		{"set result takes the call id", GateOutcome{Kind: GateSetResult, Output: &supplied}, true,
			TextOutput("c1", "cached").WithState(Command{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove}})},
		{"set result without output", GateOutcome{Kind: GateSetResult}, true, ErrorOutput("c1", "gate returned set_result without an output")},
		{"allow has none", GateOutcome{Kind: GateAllow}, false, ToolOutput{}},
		{"ask has none", GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "x"}, false, ToolOutput{}},
		{"schedule has none", GateOutcome{Kind: GateSchedule, CorrelationID: "x"}, false, ToolOutput{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.outcome.ImmediateOutput("c1")
			if ok != tt.ok || !got.Equal(tt.want) {
				t.Fatalf("got %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	if supplied.CallID != "other" {
		t.Fatal("ImmediateOutput modified the gate's output")
	}
}

func TestGateOutcomeValidate(t *testing.T) {
	out := TextOutput("c", "x")
	tests := []struct {
		name    string
		outcome GateOutcome
		ok      bool
	}{
		{"allow", GateOutcome{Kind: GateAllow}, true},
		{"allow with reason", GateOutcome{Kind: GateAllow, Reason: "x"}, false},
		{"block", GateOutcome{Kind: GateBlock, Reason: "no"}, true},
		{"block with output", GateOutcome{Kind: GateBlock, Reason: "no", Output: &out}, false},
		{"set result", GateOutcome{Kind: GateSetResult, Output: &out}, true},
		{"set result without output", GateOutcome{Kind: GateSetResult}, false},
		{"confirmation", GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "perm.r.1.c", Timeout: Duration(time.Hour)}, true},
		{"confirmation without id", GateOutcome{Kind: GateRequireConfirmation}, false},
		{"confirmation with control char", GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "a\nb"}, false},
		{"confirmation with delay", GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "x", Delay: 1}, false},
		{"confirmation negative timeout", GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "x", Timeout: -1}, false},
		{"schedule", GateOutcome{Kind: GateSchedule, CorrelationID: "sched.r.1.c", Delay: Duration(time.Second), ActionKind: "email"}, true},
		{"schedule without id", GateOutcome{Kind: GateSchedule, Delay: 1}, false},
		{"schedule with timeout", GateOutcome{Kind: GateSchedule, CorrelationID: "x", Timeout: 1}, false},
		{"schedule negative delay", GateOutcome{Kind: GateSchedule, CorrelationID: "x", Delay: -1}, false},
		{"unknown kind", GateOutcome{Kind: "later"}, false},
		{"empty kind", GateOutcome{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, "Validate()", tt.outcome.Validate(), tt.ok, ErrInvalidGateOutcome)
		})
	}
}

func TestNarrowingIntersectTable(t *testing.T) {
	tests := []struct {
		a, b, want ToolCapabilityNarrowing
	}{
		{NarrowingConfigured, NarrowingConfigured, NarrowingConfigured},
		{"", NarrowingConfigured, NarrowingConfigured},
		{"", "", NarrowingConfigured},
		{NarrowingConfigured, NarrowingDenyAll, NarrowingDenyAll},
		{NarrowingDenyAll, NarrowingConfigured, NarrowingDenyAll},
		{NarrowingDenyAll, NarrowingDenyAll, NarrowingDenyAll},
		{"", NarrowingDenyAll, NarrowingDenyAll},
		{"bogus", NarrowingConfigured, NarrowingDenyAll},
	}
	for _, tt := range tests {
		t.Run(string(tt.a)+"&"+string(tt.b), func(t *testing.T) {
			if got := tt.a.Intersect(tt.b); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNarrowingValidAndGate(t *testing.T) {
	tests := []struct {
		n     ToolCapabilityNarrowing
		valid bool
		allow bool
	}{
		{"", true, true},
		{NarrowingConfigured, true, true},
		{NarrowingDenyAll, true, false},
		{"Configured", false, false},
		{"allow_all", false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.n), func(t *testing.T) {
			if tt.n.Valid() != tt.valid {
				t.Fatalf("Valid() = %v, want %v", tt.n.Valid(), tt.valid)
			}
			o := tt.n.GateOutcome()
			if o.IsAllow() != tt.allow {
				t.Fatalf("GateOutcome() = %+v, want allow=%v", o, tt.allow)
			}
			if !tt.allow && o.Reason != DenyAllReason {
				t.Fatalf("deny reason %q, want %q", o.Reason, DenyAllReason)
			}
		})
	}
}
