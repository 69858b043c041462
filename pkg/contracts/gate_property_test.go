package contracts

import (
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
