package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestPolicyTestNeedsTheRoleThatReadsArguments: the policy test replays recorded calls
// with their arguments, so a candidate rule on an argument's prefix tells whoever runs it
// that prefix (changed or not). Only a role that may read those arguments anyway (viewer:
// GET /v1/batches) may run it; an operator token, refused the batches, is refused the
// test with 403 missing_role instead of learning a secret one character per request.
func TestPolicyTestNeedsTheRoleThatReadsArguments(t *testing.T) {
	h := newHarness(t, loadRoleTokens(t))
	h.park("run-secret", map[string]string{"secret": "swordfish"})
	guess := func(prefix string) string {
		cand := strings.Replace(testConfig, "  rules:\n", "  rules:\n    - { pattern: 'ask_me(secret ~ \""+prefix+"*\")', behavior: deny }\n", 1)
		body, err := json.Marshal(httpapi.PolicyTestRequest{Config: cand, Runs: []string{"run-secret"}})
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}

	if r := h.do("GET", "/v1/batches", "", tok("operator")); r.status != http.StatusForbidden {
		t.Fatalf("operator → GET /v1/batches: %d %s, want 403: the arguments are not the operator's to read", r.status, r.body)
	}
	for _, prefix := range []string{"s", "x"} {
		r := h.do("POST", "/v1/policy/test", guess(prefix), tok("operator"))
		if r.status != http.StatusForbidden || r.apiError(t).Code != httpapi.CodeMissingRole {
			t.Errorf("operator → POST /v1/policy/test guessing %q: %d %s, want 403 missing_role", prefix, r.status, r.body)
		}
	}

	// The viewer reads the arguments anyway: the test answers it.
	for prefix, changed := range map[string]int{"s": 1, "x": 0} {
		var rep httpapi.PolicyTestReport
		r := h.do("POST", "/v1/policy/test", guess(prefix), tok("viewer"))
		if r.status != http.StatusOK {
			t.Fatalf("viewer → POST /v1/policy/test: %d %s", r.status, r.body)
		}
		r.json(t, &rep)
		if rep.Total != 2 || rep.Changed != changed {
			t.Errorf("viewer's policy test with prefix %q: %d calls, %d changed; want 2 (echo and ask_me), %d", prefix, rep.Total, rep.Changed, changed)
		}
	}
}
