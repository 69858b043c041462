//go:build unix

package mcpbridge_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPipeline_mcpReconcileCompanion runs the pipeline against the real test MCP server
// with executors.mcp[].reconcile naming charge_status the companion of charge (a
// never_replay tool: the server lists it without annotations). The executor dies inside
// the first call after the server charged; the redelivery calls the companion with the
// call's arguments and its idempotency key in _meta, the companion finds the charge under
// that key, and the call completes "charged 7" — charged once, never called again (the
// answers not_run and unknown are covered by the execcore tests). Without the reconcile entry the same crash publishes the call indeterminate (how this
// test failed before the companion was wired: "owner lease expired after the executor
// was entered").
func TestPipeline_mcpReconcileCompanion(t *testing.T) {
	for _, companion := range []bool{true, false} {
		t.Run(fmt.Sprintf("companion=%v", companion), func(t *testing.T) {
			log := newCallLog(t)
			reconcile := ""
			if companion {
				reconcile = `, reconcile: {charge: {tool: charge_status}}`
			}
			const run, callID = "run-reconcile", "toolu_charge"
			op := contracts.OperationID(run, 1, callID)
			// The test server charges before it answers: the crash comes after the charge.
			ctx, stack := startPipeline(t, app.Options{Services: withAPI(),
				Faults: crashOnceInTool(func(id string) bool { return id == op })}, `
consumers: {ack_wait: 1s}
policy:
  default_behavior: allow
executors:
  reconcile: {backoff: 10ms, timeout: 5s}
  mcp:
    - {name: test, command: %q, args: ["-log", %q]%s}
`, serverBin, string(log), reconcile)
			stack.waitCapability(t, "mcp__test__charge", contracts.CapabilityNonRecoverable)
			c := stack.client

			sub := contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: 1,
				Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"mcp__test__charge"}},
				Calls: []contracts.ToolCall{{CallID: callID, ToolID: "mcp__test__charge", Arguments: []byte(`{"amount":7}`)}}}
			if _, err := c.Submit(ctx, sub); err != nil {
				t.Fatal(err)
			}
			res, err := c.Await(ctx, run, 1)
			if err != nil {
				t.Fatal(err)
			}
			key := contracts.IdempotencyKey(op)
			var charges, statuses []string
			for _, line := range log.lines(t) {
				switch f := strings.Fields(line); {
				case len(f) == 3 && f[0] == "charge":
					charges = append(charges, f[1]+" "+f[2])
				case len(f) == 3 && f[0] == "charge_status":
					statuses = append(statuses, f[1]+" "+f[2])
				}
			}
			if len(charges) != 1 || charges[0] != key+" 7" {
				t.Errorf("charges the server saw %q, want one under %s", charges, key)
			}
			if len(res.Results) != 1 {
				t.Fatalf("results %+v", res.Results)
			}
			got := res.Results[0]
			if !companion {
				if got.Outcome != contracts.OutcomeIndeterminate || len(statuses) != 0 {
					t.Errorf("result %+v, companion calls %q: want indeterminate, no companion call", got, statuses)
				}
				return
			}
			if len(statuses) != 1 || statuses[0] != key+" ran" {
				t.Errorf("companion calls %q, want one with the call's key %s answering ran", statuses, key)
			}
			if got.Outcome != contracts.OutcomeCompleted || got.Output.Text() != "charged 7" {
				t.Fatalf("result %+v, want completed \"charged 7\" from the companion", got)
			}
		})
	}
}
