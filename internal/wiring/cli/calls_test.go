package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestCallsResolve runs `awaken calls resolve` on a call a run cancel sealed indeterminate
// after its batch was published: the answer says corrected, the correction is on the
// run's corrections subject with the actor of --as, and a second resolution fails. Bad
// flag combinations are usage errors.
func TestCallsResolve(t *testing.T) {
	cfg := parseConfig(t, "storage: {memory: true}\ntools:\n  - id: ask_me\npolicy:\n  default_behavior: allow\n  rules:\n    - { pattern: ask_me, behavior: ask }\n")
	ctx := servicetest.Context(t, 2*time.Minute)
	srv, _ := startStack(t, ctx, cfg)
	c := srv.Client
	const run = "run-cli-resolve"
	sub := contracts.BatchSubmission{RunID: run, ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"ask_me"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "ask_me", Arguments: json.RawMessage(`{}`)}}}
	stacktest.Park(t, ctx, c, sub, "c1")
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"runs", "cancel", run, "--nats-url", srv.URL()}, &out, &errb); code != 0 {
		t.Fatalf("runs cancel: exit %d: %s", code, errb.String())
	}
	if _, err := c.Await(ctx, run, 1); err != nil {
		t.Fatalf("wait for the sealed batch: %v", err)
	}
	op := contracts.OperationID(run, 1, "c1")

	for _, args := range [][]string{
		{"calls", "resolve", op},
		{"calls", "resolve", op, "--ran", "--not-run"},
		{"calls", "resolve", op, "--ran"},
		{"calls", "resolve", op, "--not-run", "--text", "x"},
		{"calls", "frobnicate", op},
	} {
		if code := Main(ctx, append(args, "--nats-url", srv.URL()), &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}

	out.Reset()
	errb.Reset()
	if code := Main(ctx, []string{"calls", "resolve", op, "--not-run", "--note", "nothing was sent", "--as", "ana",
		"--nats-url", srv.URL()}, &out, &errb); code != 0 {
		t.Fatalf("calls resolve: exit %d: %s", code, errb.String())
	}
	var res client.CallResolveResult // JSON: stdout is no terminal
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Status != contracts.ResolutionCorrected || res.Outcome != contracts.ReconcileNotRun {
		t.Errorf("calls resolve said %q (%v)", out.String(), err)
	}
	corrections, err := c.Corrections(ctx, run)
	if err != nil || len(corrections) != 1 || corrections[0].Actor != "ana" ||
		corrections[0].Corrected.Text() != contracts.NotRunPrefix+"nothing was sent" {
		t.Fatalf("corrections = %+v (%v)", corrections, err)
	}
	if code := Main(ctx, []string{"calls", "resolve", op, "--ran", "--text", "sent", "--nats-url", srv.URL()}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "resolved already") {
		t.Errorf("a second resolution: exit %d: %s", code, errb.String())
	}
}
