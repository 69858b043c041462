package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
)

// exampleConfig declares the stock echo tool and one that needs a human's approval.
const exampleConfig = `
tools:
  - id: echo
  - id: ask_me
    builtin: ran
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask, timeout: 1h }
`

// batch is a model turn of one run: one call per (call id, tool, JSON arguments).
func batch(run string, step int64, calls ...contracts.ToolCall) contracts.BatchSubmission {
	tools := []string{}
	for _, c := range calls {
		tools = append(tools, c.ToolID)
	}
	return contracts.BatchSubmission{RunID: run, ThreadID: "thread-1", Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools}, Calls: calls}
}

// deployment runs the whole deployment of exampleConfig in this process (pkg/devserver)
// and returns a client on it, with a context bounding the example; stop closes both.
// Against a real deployment, use client.Dial(NATS_URL).
func deployment() (ctx context.Context, c *client.Client, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv, err := devserver.Start(ctx, devserver.Options{ConfigYAML: []byte(exampleConfig)})
	if err != nil {
		log.Fatal(err)
	}
	return ctx, srv.Client, func() {
		_ = srv.Close()
		cancel()
	}
}

// Submit a batch of tool calls and wait for its ordered results.
func ExampleClient_SubmitAndWait() {
	ctx, c, stop := deployment()
	defer stop()

	res, err := c.SubmitAndWait(ctx, batch("run-1", 1,
		contracts.ToolCall{CallID: "c1", ToolID: "echo", Arguments: []byte(`{"text":"hello"}`)},
		contracts.ToolCall{CallID: "c2", ToolID: "echo", Arguments: []byte(`{"text":"world"}`)},
	))
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Results {
		fmt.Printf("%d %s %s: %s\n", r.Index, r.CallID, r.Outcome, r.Output.Text())
	}
	// Output:
	// 0 c1 completed: hello
	// 1 c2 completed: world
}

// Follow a run: every published batch of it, in order, from the start of the results
// stream (after=0) or from where a previous follower stopped (a BatchResult's Sequence).
func ExampleClient_FollowRun() {
	ctx, c, stop := deployment()
	defer stop()

	for step := int64(1); step <= 2; step++ {
		text := fmt.Sprintf(`{"text":"step %d"}`, step)
		if _, err := c.SubmitAndWait(ctx, batch("run-f", step, contracts.ToolCall{CallID: "c1", ToolID: "echo", Arguments: []byte(text)})); err != nil {
			log.Fatal(err)
		}
	}
	seen := 0
	err := c.FollowRun(ctx, "run-f", 0, func(b *client.BatchResult) bool {
		fmt.Printf("%s: %s\n", b.BatchID, b.Results[0].Output.Text())
		seen++
		return seen < 2 // false stops following
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// tool-batch:run-f:1: step 1
	// tool-batch:run-f:2: step 2
}

// Resolve an approval ticket: a call the policy asks about waits, durably, until a
// person approves (or denies) its ticket; the batch then completes.
func ExampleClient_Approve() {
	ctx, c, stop := deployment()
	defer stop()

	if _, err := c.Submit(ctx, batch("run-a", 1, contracts.ToolCall{CallID: "c1", ToolID: "ask_me"})); err != nil {
		log.Fatal(err)
	}
	t, err := c.WaitTicket(ctx, "run-a", 1, "c1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ticket for %s (%s): %s\n", t.CallID, t.ToolID, t.Reason)
	if _, err := c.Approve(ctx, t, "looks fine"); err != nil {
		log.Fatal(err)
	}
	res, err := c.Await(ctx, "run-a", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s\n", res.Results[0].CallID, res.Results[0].Outcome)
	// Output:
	// ticket for c1 (ask_me): permission
	// c1 completed
}
