package contracts

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSubmissionTenantAndRunPolicyLimits: a tenant decodes and is bounded; a run policy
// that carries limits is refused (limits are the host's).
func TestSubmissionTenantAndRunPolicyLimits(t *testing.T) {
	base := `{"run_id":"r1","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":["echo"]},"calls":[{"call_id":"c","tool_id":"echo","arguments":{}}]`
	s, err := DecodeSubmission([]byte(base + `,"tenant":"acme"}`))
	if err != nil || s.Tenant != "acme" {
		t.Fatalf("tenant: %+v, %v", s, err)
	}
	if _, err := DecodeSubmission([]byte(base + `,"tenant":"` + strings.Repeat("x", MaxTenantBytes+1) + `"}`)); err == nil {
		t.Fatal("an oversized tenant was accepted")
	}
	_, err = DecodeSubmission([]byte(base + `,"policy":{"limits":[{"name":"n","tools":["echo"],"key":"run","count":1}]}}`))
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Code != RejectInvalidPolicy || !strings.Contains(rej.Message, "policy.limits") {
		t.Fatalf("run policy limits: %v, want an invalid_policy refusal", err)
	}
}

// TestLimitLedgerKeyRoundTrip: any key value, the empty one included, and a window make a
// valid key that parses back.
func TestLimitLedgerKeyRoundTrip(t *testing.T) {
	w := time.Unix(1700000000, 0).UTC()
	for _, tc := range []struct {
		value  string
		window time.Time
	}{{"", time.Time{}}, {"run-1", time.Time{}}, {"ténant with spaces/and.dots", w}} {
		k := LimitLedgerKey("lim", tc.value, tc.window)
		if strings.ContainsAny(k, " /*>") {
			t.Fatalf("key %q is no KV key", k)
		}
		name, value, window, err := ParseLimitLedgerKey(k)
		if err != nil || name != "lim" || value != tc.value || !window.Equal(tc.window) {
			t.Fatalf("%q parsed to %q %q %v %v", k, name, value, window, err)
		}
	}
}
