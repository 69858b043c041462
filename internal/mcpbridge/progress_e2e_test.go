//go:build unix

package mcpbridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPipeline_mcpProgressIsBridged: brain-exec sends a progressToken with an MCP call, and
// the server's notifications/progress reach the run's events subject as throttled
// io.awaken.tool.progress.v1 events, the last one included; the result carries only the
// tool's answer.
func TestPipeline_mcpProgressIsBridged(t *testing.T) {
	ctx, stack := startPipeline(t, app.Options{}, `
policy: {default_behavior: allow}
executors:
  mcp:
    - {name: test, command: %q}
`, serverBin)
	c := stack.client
	js := stack.js
	const run, steps = "run-mcp-progress", 30
	sub := contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"mcp__test__progress"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "mcp__test__progress", Arguments: fmt.Appendf(nil, `{"steps":%d,"ms":20}`, steps)}},
	}
	began := time.Now()
	res, err := c.SubmitAndWait(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	if got := res.Results[0].Output.Text(); got != fmt.Sprintf("progressed %d steps (token: yes)", steps) {
		t.Fatalf("result %q: the request carried no progress token, or progress leaked into it", got)
	}
	events, _ := servicetest.ProgressEvents(t, js, stack.Env.Names, run)
	servicetest.CheckProgress(t, events, "c1", steps, elapsed, execcore.ProgressInterval)
	if p := events[0]; p.ToolID != "mcp__test__progress" || p.BatchID != contracts.BatchID(run, 1) || p.Attempt != 1 {
		t.Errorf("progress event %+v", p)
	}
}
