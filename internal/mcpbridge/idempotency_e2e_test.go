//go:build unix

package mcpbridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestPipeline_mcpIdempotencyKeyIsStableAcrossARedelivery: a real MCP server reads the
// call's idempotency key from the tools/call _meta (io.awaken/idempotency-key). The
// executor dies inside the first run of the call; the redelivered request runs it again
// (the trusted annotations pin it replay_safe), and the server sees the same key both
// times — the key of the operation, not of the attempt.
func TestPipeline_mcpIdempotencyKeyIsStableAcrossARedelivery(t *testing.T) {
	log := newCallLog(t)
	cfg, err := config.Parse(fmt.Appendf(nil, `
storage: {memory: true}
consumers: {ack_wait: 1s}
executors:
  mcp:
    - {name: test, command: %q, args: ["-log", %q], trust_annotations: true}
`, serverBin, string(log)))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var crashed sync.Map
	stack := startStack(ctx, t, srv, app.Options{Config: cfg,
		Services: append(app.AllServices(), app.API), API: api.Options{HTTPAddr: "127.0.0.1:0"},
		Faults: func(_ context.Context, _ string, point pipeline.FaultPoint, op string) error {
			if point != pipeline.FaultInTool {
				return nil
			}
			if _, again := crashed.LoadOrStore(op, true); again {
				return nil
			}
			return errors.New("injected crash inside the tool")
		}})
	nc, _ := srv.Conn(t)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := annotationRun{stack: stack, client: c, log: log}
	r.waitCapability(t, "mcp__test__meta", contracts.CapabilityReplaySafe)

	const run = "run-idem"
	sub := contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"mcp__test__meta"}},
		Calls: []contracts.ToolCall{{CallID: "functions.meta:0", ToolID: "mcp__test__meta", Arguments: []byte(`{}`)}}}
	if _, err := c.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	res, err := c.Await(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != contracts.OutcomeCompleted {
		t.Fatalf("results %+v", res.Results)
	}
	op := contracts.OperationID(run, 1, "functions.meta:0")
	want := contracts.IdempotencyKey(op)
	var keys []string
	for _, line := range log.lines(t) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "meta" && f[1] == op {
			keys = append(keys, f[2])
		}
	}
	if len(keys) != 2 || keys[0] != want || keys[1] != want {
		t.Fatalf("keys the server saw %q, want %s twice (the crashed run and its replay)", keys, want)
	}
	if !strings.Contains(res.Results[0].Output.Content[0].Text, `"io.awaken/idempotency-key":"`+want+`"`) {
		t.Errorf("the _meta the server echoed: %s", res.Results[0].Output.Content[0].Text)
	}
}
