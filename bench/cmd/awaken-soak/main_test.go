package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The soak's configuration is the example's with its relative module paths made absolute
// (the copy lives in a temporary directory), a per-run limit in its policy (a policy
// section made when the example has none) and the retention section added; an example
// with a retention or limits section of its own is refused rather than given two.
func TestSoakConfig(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join(dir, "examples", "awaken.yaml")
	if err := os.MkdirAll(filepath.Dir(example), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := "tools:\n  - id: wc\n    module: ../bin/wasm/wc.wasm\n  - id: abs\n    module: /opt/x.wasm\n"
	for _, tc := range []struct{ name, example, policy string }{
		{"with a policy", tools + "policy:\n  default_behavior: allow\n", "policy:\n  limits:\n" + soakLimit + "  default_behavior: allow\n"},
		{"without one", tools, "\npolicy:\n  limits:\n" + soakLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(example, []byte(tc.example), 0o644); err != nil {
				t.Fatal(err)
			}
			path, err := soakConfig(example, t.TempDir(), "2m0s")
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"module: " + filepath.Join(dir, "bin/wasm/wc.wasm") + "\n", "module: /opt/x.wasm\n",
				tc.policy, "retention:\n  default: 2m0s\n"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("soak configuration lacks %q:\n%s", want, b)
				}
			}
		})
	}
	for _, refused := range []string{"retention:\n  default: 1h\n", "policy:\n  limits: []\n", "policy: { default_behavior: allow }\n"} {
		if err := os.WriteFile(example, []byte(refused), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := soakConfig(example, t.TempDir(), "2m0s"); err == nil {
			t.Errorf("example %q was accepted", refused)
		}
	}
}

// A limits ledger key names its run in its encoded key value: a run-keyed limit's is the
// run id, a step-keyed limit's {run id}/{step}; a record key has the run id as a token.
func TestRunsOfKey(t *testing.T) {
	for _, tc := range []struct {
		bucket, key, want string
	}{
		{"AWAKEN_limits", contracts.LimitLedgerKey("soak-per-run", "soak-1-7", time.Time{}), "soak-1-7"},
		{"AWAKEN_limits", contracts.LimitLedgerKey("per-step", "soak-1-7/1", time.Unix(3600, 0)), "soak-1-7"},
		{"AWAKEN_calls", "brain.soak-1-7.1.c1", "soak-1-7"},
	} {
		if got := runsOfKey(tc.bucket, tc.key); !slices.Contains(got, tc.want) {
			t.Errorf("runsOfKey(%s, %s) = %v, want %s among them", tc.bucket, tc.key, got, tc.want)
		}
	}
	if got := runsOfKey("AWAKEN_limits", "not-a-ledger-key"); len(got) != 0 {
		t.Errorf("runsOfKey of a malformed ledger key = %v, want none", got)
	}
}

// A store plateaus when its size at the end is within 1.2× of the 50% mark, or grew by
// less than one block allocation's slack; the 50% mark is the first sample with half the
// calls done.
func TestSummarizePlateau(t *testing.T) {
	at := func(calls, grows, level, tiny int64) sample {
		return sample{Calls: calls, Stores: map[string]store{"grows": {Bytes: grows}, "level": {Bytes: level}, "tiny": {Bytes: tiny}}}
	}
	sum := &summary{Stores: map[string]storeSummary{}, Samples: []sample{
		at(100, 10<<20, 50<<20, 8192), at(500, 20<<20, 55<<20, 8192), at(1000, 30<<20, 56<<20, 16384),
	}}
	summarize(sum)
	for name, want := range map[string]bool{"grows": false, "level": true, "tiny": true} {
		if got := sum.Stores[name].Plateaued; got != want {
			t.Errorf("%s: plateaued %v, want %v (%+v)", name, got, want, sum.Stores[name])
		}
	}
	if got := sum.Stores["grows"].BytesMid; got != 20<<20 {
		t.Errorf("50%% mark of grows: %d bytes, want the sample at 500 calls (%d)", got, 20<<20)
	}
}
