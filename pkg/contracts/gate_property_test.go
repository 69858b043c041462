package contracts

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// genNarrowing draws the two valid narrowings, the empty string (configured) and
// arbitrary strings, so that properties also cover values a buggy producer might send.
func genNarrowing() *rapid.Generator[ToolCapabilityNarrowing] {
	return rapid.Custom(func(t *rapid.T) ToolCapabilityNarrowing {
		return rapid.OneOf(
			rapid.SampledFrom([]ToolCapabilityNarrowing{"", NarrowingConfigured, NarrowingDenyAll}),
			rapid.Map(rapid.String(), func(s string) ToolCapabilityNarrowing { return ToolCapabilityNarrowing(s) }),
		).Draw(t, "narrowing")
	})
}

// permits orders narrowings by authority: configured (or empty) grants the host's, every
// other value none.
func permits(n ToolCapabilityNarrowing) bool { return n == "" || n == NarrowingConfigured }

func TestPropertyNarrowingIntersection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genNarrowing().Draw(t, "a")
		b := genNarrowing().Draw(t, "b")
		c := genNarrowing().Draw(t, "c")
		ab := a.Intersect(b)
		if permits(ab) && (!permits(a) || !permits(b)) {
			t.Fatalf("%q ∩ %q = %q widens", a, b, ab)
		}
		if permits(a) && permits(b) && ab != NarrowingConfigured {
			t.Fatalf("%q ∩ %q = %q narrows two configured operands", a, b, ab)
		}
		if ba := b.Intersect(a); ab != ba {
			t.Fatalf("not commutative: %q ∩ %q = %q but %q ∩ %q = %q", a, b, ab, b, a, ba)
		}
		if l, r := ab.Intersect(c), a.Intersect(b.Intersect(c)); l != r {
			t.Fatalf("not associative: (%q ∩ %q) ∩ %q = %q but %q ∩ (%q ∩ %q) = %q", a, b, c, l, a, b, c, r)
		}
		if !ab.Valid() {
			t.Fatalf("intersection produced invalid %q", ab)
		}
		if aa := a.Intersect(a); permits(aa) != permits(a) {
			t.Fatalf("not idempotent: %q ∩ %q = %q", a, a, aa)
		}
	})
}

func TestPropertyOnlyAllowVerdictProjectsToAllow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := ToolPermissionVerdict{
			Kind: rapid.OneOf(
				rapid.SampledFrom([]PermissionVerdictKind{VerdictAllow, VerdictDeny, VerdictRequireConfirmation, VerdictSchedule}),
				rapid.Map(rapid.String(), func(s string) PermissionVerdictKind { return PermissionVerdictKind(s) }),
			).Draw(t, "kind"),
			Reason:        rapid.String().Draw(t, "reason"),
			CorrelationID: rapid.String().Draw(t, "correlation"),
			Delay:         Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "delay")),
			Timeout:       Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "timeout")),
		}
		o := v.IntoGateOutcome()
		if o.IsAllow() != (v.Kind == VerdictAllow) {
			t.Fatalf("verdict %q projected to %q", v.Kind, o.Kind)
		}
		if (o.AuditLabel() == AuditDecisionAllow) != (v.Kind == VerdictAllow) {
			t.Fatalf("verdict %q audited as %q", v.Kind, o.AuditLabel())
		}
		switch v.Kind {
		case VerdictDeny:
			if o.Reason != v.Reason {
				t.Fatalf("deny reason changed: %q → %q", v.Reason, o.Reason)
			}
		case VerdictRequireConfirmation, VerdictSchedule:
			if o.CorrelationID != v.CorrelationID {
				t.Fatalf("correlation id changed: %q → %q", v.CorrelationID, o.CorrelationID)
			}
		}
	})
}

// genPolicyOutcome draws an outcome a permission policy can produce (allow, block,
// require_confirmation with or without a timeout, schedule with a delay) and, rarely, one
// of unknown kind.
func genPolicyOutcome(label string) *rapid.Generator[GateOutcome] {
	return rapid.Custom(func(t *rapid.T) GateOutcome {
		dur := func(name string, minimum int64) Duration {
			return Duration(rapid.Int64Range(minimum, 3).Draw(t, name)) * Duration(time.Hour)
		}
		switch rapid.IntRange(0, 9).Draw(t, label+".kind") {
		case 0, 1:
			return GateOutcome{Kind: GateAllow}
		case 2, 3:
			return GateOutcome{Kind: GateBlock, Reason: label + " says no"}
		case 4, 5, 6:
			return GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "perm-" + label, Timeout: dur(label+".timeout", 0)}
		case 7, 8:
			return GateOutcome{Kind: GateSchedule, CorrelationID: "perm-" + label, Delay: dur(label+".delay", 1)}
		default:
			return GateOutcome{Kind: GateOutcomeKind(rapid.String().Draw(t, label+".unknown"))}
		}
	})
}

// atLeastAsStrict reports whether a keeps the call from its effect at least as much as b:
// a stricter kind, or the same kind with parameters no looser (a delay no shorter, an
// approval deadline no later; a zero timeout is no deadline).
func atLeastAsStrict(a, b GateOutcome) bool {
	if a.Strictness() != b.Strictness() {
		return a.Strictness() > b.Strictness()
	}
	switch a.Kind {
	case GateSchedule:
		return a.Delay >= b.Delay
	case GateRequireConfirmation:
		return b.Timeout == 0 || a.Timeout != 0 && a.Timeout <= b.Timeout
	}
	return true
}

// A run policy may only narrow what the host allows: the composed outcome is never less
// strict than the host's (nor than the run's), its kind is the stricter of the two, it is
// as loose as the looser constraint allows (it equals one operand's strictness), and the
// order of the operands does not change kind, delay or timeout.
func TestPropertyRunPolicyOnlyNarrowsHost(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		host := genPolicyOutcome("host").Draw(t, "host")
		run := genPolicyOutcome("run").Draw(t, "run")
		got := NarrowGateOutcome(host, run)
		switch got.Kind {
		case GateAllow, GateBlock, GateRequireConfirmation, GateSchedule:
		default:
			t.Fatalf("composed outcome of unknown kind %q", got.Kind)
		}
		known := func(o GateOutcome) bool {
			return o.Kind == GateAllow || o.Kind == GateBlock || o.Kind == GateRequireConfirmation || o.Kind == GateSchedule
		}
		if !known(host) || !known(run) {
			if got.Kind != GateBlock {
				t.Fatalf("unknown operand composed to %+v, want block", got)
			}
			return
		}
		if !atLeastAsStrict(got, host) {
			t.Fatalf("run %+v widened host %+v to %+v", run, host, got)
		}
		if !atLeastAsStrict(got, run) {
			t.Fatalf("host %+v widened run %+v to %+v", host, run, got)
		}
		if want := max(host.Strictness(), run.Strictness()); got.Strictness() != want {
			t.Fatalf("host %+v ∘ run %+v = %+v: strictness %d, want %d", host, run, got, got.Strictness(), want)
		}
		if got.Kind == GateAllow && (host.Kind != GateAllow || run.Kind != GateAllow) {
			t.Fatalf("allowed although host %+v, run %+v", host, run)
		}
		rev := NarrowGateOutcome(run, host)
		if rev.Kind != got.Kind || rev.Delay != got.Delay || rev.Timeout != got.Timeout {
			t.Fatalf("order matters: host∘run = %+v, run∘host = %+v", got, rev)
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("composed outcome invalid: %v", err)
		}
	})
}

// The cases of the security report: a run policy cannot turn the host's ask into a
// schedule, shorten the host's schedule delay or lengthen its approval timeout.
func TestNarrowGateOutcomeKeepsHostConstraints(t *testing.T) {
	h := Duration(time.Hour)
	cases := []struct {
		name      string
		host, run GateOutcome
		want      GateOutcome
	}{
		{"run schedule cannot replace host ask",
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c"},
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: Duration(time.Second)},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c"}},
		{"run cannot shorten host delay",
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: 2 * h},
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: Duration(time.Second)},
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: 2 * h}},
		{"run may lengthen host delay",
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: h},
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: 3 * h},
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: 3 * h}},
		{"run cannot lengthen host timeout",
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: 24 * h},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: 876000 * h},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: 24 * h}},
		{"run may set a timeout where the host has none",
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c"},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: h},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: h}},
		{"run ask narrows host schedule",
			GateOutcome{Kind: GateSchedule, CorrelationID: "c", Delay: h},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c"},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c"}},
		{"run ask cannot override host deny",
			GateOutcome{Kind: GateBlock, Reason: "host"},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c"},
			GateOutcome{Kind: GateBlock, Reason: "host"}},
		{"run allow keeps host ask",
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: h},
			GateOutcome{Kind: GateAllow},
			GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "c", Timeout: h}},
	}
	for _, c := range cases {
		if got := NarrowGateOutcome(c.host, c.run); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}
