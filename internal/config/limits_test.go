package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const limitsTools = `
tools:
  - id: echo
    cost: 2
  - id: free
policy:
  default_behavior: allow
  limits:
`

// TestBadLimitsRefuseTheConfiguration: every bad limit refuses the configuration at
// start with an error naming the entry (index and name) and the field.
func TestBadLimitsRefuseTheConfiguration(t *testing.T) {
	for _, tc := range []struct{ name, entry, want string }{
		{"zero count", `{name: c, tools: [echo], key: run, count: 0}`, "policy.limits[0] (c).count: 0 must be > 0"},
		{"negative count", `{name: c, tools: [echo], key: run, count: -1}`, "policy.limits[0] (c).count: -1 must be > 0"},
		{"zero rate", `{name: r, tools: [echo], key: run, rate: {n: 0, window: 1m}}`, "policy.limits[0] (r).rate.n: 0 must be > 0"},
		{"negative budget", `{name: b, tools: [echo], key: run, budget: {amount: -3}}`, "policy.limits[0] (b).budget.amount: -3 must be > 0"},
		{"unknown key", `{name: k, tools: [echo], key: user, count: 1}`, `policy.limits[0] (k).key: unknown key "user"`},
		{"missing key", `{name: k, tools: [echo], count: 1}`, "policy.limits[0] (k).key: missing"},
		{"bad label key", `{name: k, tools: [echo], key: "label:", count: 1}`, `policy.limits[0] (k).key: label key "label:"`},
		{"unparsable window", `{name: w, tools: [echo], key: run, rate: {n: 1, window: soon}}`, `policy.limits[0] (w).rate.window: unparsable window "soon"`},
		{"missing window", `{name: w, tools: [echo], key: run, rate: {n: 1}}`, `policy.limits[0] (w).rate.window: unparsable window ""`},
		{"unparsable budget window", `{name: w, tools: [echo], key: run, budget: {amount: 1, window: 1x}}`, `policy.limits[0] (w).budget.window: unparsable window "1x"`},
		{"two kinds", `{name: two, tools: [echo], key: run, count: 1, rate: {n: 1, window: 1m}}`, "policy.limits[0] (two): needs exactly one of concurrency, rate, count and budget, has 2"},
		{"no kind", `{name: none, tools: [echo], key: run}`, "policy.limits[0] (none): needs exactly one of concurrency, rate, count and budget, has 0"},
		{"budget on a tool without a cost", `{name: spend, tools: ["*"], key: run, budget: {amount: 10}}`,
			"policy.limits[0] (spend).tools: budget limit spend matches tool free, which has no cost"},
		{"budget on no tool", `{name: spend, tools: [nosuch], key: run, budget: {amount: 10}}`, "policy.limits[0] (spend).tools: budget limit spend matches no registered tool"},
		{"ask on a count", `{name: c, tools: [echo], key: run, count: 1, over: ask}`, `policy.limits[0] (c).over: "ask" does not apply to a count limit`},
		{"no tools", `{name: c, key: run, count: 1}`, "policy.limits[0] (c).tools: at least one tool pattern is needed"},
		{"bad name", `{name: "a b", tools: [echo], key: run, count: 1}`, `policy.limits[0] (a b).name: name "a b" must have`},
		{"zero concurrency", `{name: conc, tools: [echo], key: run, concurrency: 0}`, "policy.limits[0] (conc).concurrency: 0 must be > 0"},
		{"block on a concurrency", `{name: conc, tools: [echo], key: run, concurrency: 2, over: block}`, `policy.limits[0] (conc).over: "block" does not apply to a concurrency limit`},
		{"shadow concurrency", `{name: conc, tools: [echo], key: run, concurrency: 2, shadow: true}`, "policy.limits[0] (conc).shadow: a concurrency limit cannot be a shadow limit"},
		{"wait on a count", `{name: c, tools: [echo], key: run, count: 1, over: wait}`, `policy.limits[0] (c).over: "wait" does not apply to a count limit (want block)`},
		{"ask on a rate", `{name: r, tools: [echo], key: run, rate: {n: 1, window: 1m}, over: ask}`, `policy.limits[0] (r).over: "ask" does not apply to a rate limit (want block or wait)`},
		{"negative cost", "", "tools[0].cost: -1 must be a finite number >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := limitsTools + "    - " + tc.entry + "\n"
			if tc.entry == "" {
				yaml = "tools:\n  - id: echo\n    cost: -1\n"
			}
			_, err := config.Parse([]byte(yaml))
			if err == nil {
				t.Fatalf("configuration accepted, want %q", tc.want)
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestGoodLimitsCompile: one limit of each kind compiles, in order, with its defaults
// (over: block; wait for a concurrency limit).
func TestGoodLimitsCompile(t *testing.T) {
	cfg, err := config.Parse([]byte(limitsTools + `    - {name: per-run, tools: [echo], key: run, count: 3}
    - {name: per-tenant, tools: ["*"], key: tenant, rate: {n: 10, window: 1m}}
    - {name: spend, tools: [echo], key: "label:team", budget: {amount: 10, window: 24h}, over: ask, shadow: true}
    - {name: at-once, tools: [echo], key: global, concurrency: 2}
    - {name: patient, tools: [echo], key: run, rate: {n: 5, window: 10s}, over: wait}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := contracts.CompilePolicy(cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	got := p.Limits()
	if len(got) != 5 || got[4].Kind != contracts.LimitRate || got[4].Over != contracts.LimitOverWait ||
		got[3].Kind != contracts.LimitConcurrency || got[3].N != 2 || got[3].Over != contracts.LimitOverWait ||
		got[0].Kind != contracts.LimitCount || got[0].Over != contracts.LimitOverBlock ||
		got[1].Kind != contracts.LimitRate || got[1].Window.String() != "1m0s" ||
		got[2].Kind != contracts.LimitBudget || got[2].Over != contracts.LimitOverAsk || !got[2].Shadow {
		t.Fatalf("compiled limits %+v", got)
	}
	sub := &contracts.BatchSubmission{RunID: "r", Tenant: "acme", Metadata: map[string]string{"team": "blue"}}
	if got[0].KeyValue(sub) != "r" || got[1].KeyValue(sub) != "acme" || got[2].KeyValue(sub) != "blue" {
		t.Fatalf("key values %q %q %q", got[0].KeyValue(sub), got[1].KeyValue(sub), got[2].KeyValue(sub))
	}
}
