package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestBatchWatch runs `awaken batch watch` over the pipeline while a batch runs the
// progress tool: it prints the tool's progress and every call's state changes, and ends
// once the batch is published.
func TestBatchWatch(t *testing.T) {
	cfg := parseConfig(t, "storage: {memory: true}\npolicy: {default_behavior: allow}\ntools:\n  - id: progress\n  - id: echo\n")
	ctx := servicetest.Context(t, time.Minute)
	srv, _ := startStack(t, ctx, cfg)

	const run = "run-watch"
	batchID := contracts.BatchID(run, 1)
	var out, errb natstest.SyncBuffer
	exited := make(chan int, 1)
	go func() { exited <- Main(ctx, []string{"batch", "watch", batchID, "--nats-url", srv.URL()}, &out, &errb) }()
	natstest.WaitFor(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "watching "+batchID) },
		"the watch to subscribe")

	c := srv.Client
	sub := servicetest.Submission(run, 1, servicetest.CallJSON("c1", "progress", map[string]int{"steps": 6, "ms": 100}),
		servicetest.CallJSON("c2", "echo", map[string]string{"text": "after"}))
	if _, err := c.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-ctx.Done():
		t.Fatalf("the watch did not end with the batch:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"progress c1 (progress): 6/6 step 6 of 6\n",
		"call c1 (progress): Executing\n",
		"call c1 (progress): Executing (attempt 1, running)\n",
		`call c1 (progress): Completed: "done after 6 steps"` + "\n",
		`call c2 (echo): Completed: "after"` + "\n",
		"batch " + batchID + " published\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the watch did not print %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "batch "+batchID+" published\n") {
		t.Errorf("the watch went on after the batch was published:\n%s", got)
	}
}
