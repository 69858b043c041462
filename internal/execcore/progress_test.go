package execcore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// TestGoToolProgress: a Go tool's reports reach the run's events subject throttled, the
// last one included, and never its record: the committed output and timeline are what
// they would be without them. A report outside a tool body is ignored.
func TestGoToolProgress(t *testing.T) {
	e := exectest.New(t, testConfig)
	const steps = 40
	start(t, e, &scripted{body: func(ctx context.Context, _ execcore.Invocation) (contracts.ToolOutput, error) {
		for i := 1; i <= steps; i++ {
			time.Sleep(10 * time.Millisecond) // the tool's own work, not a wait for the test
			tool.ReportProgress(ctx, float64(i), steps, fmt.Sprintf("step %d of %d", i, steps))
		}
		return contracts.TextOutput("", "finished"), nil
	}})
	tool.ReportProgress(context.Background(), 1, 2, "nobody listens") // outside a body: a no-op
	c := call("call_1", "tool", neverReplay)
	began := time.Now()
	e.Allow(c)
	rec := e.WaitTerminal(c)
	elapsed := time.Since(began)
	if got, _ := exectest.Text(t, rec); got != "finished" {
		t.Errorf("output %q", got)
	}
	for _, s := range exectest.Stages(rec) {
		if strings.Contains(s, "progress") {
			t.Errorf("the record's timeline holds progress: %v", exectest.Stages(rec))
		}
	}
	events, others := servicetest.ProgressEvents(t, e.JS, e.Names, c.RunID)
	servicetest.CheckProgress(t, events, c.CallID, steps, elapsed, execcore.ProgressInterval)
	if others != 0 {
		t.Errorf("%d other events on the events subject", others)
	}
	if p := events[0]; p.RunID != c.RunID || p.Step != c.Step || p.ToolID != "tool" || p.Attempt != 1 || p.Seq == 0 {
		t.Errorf("progress event %+v", p)
	}
}
