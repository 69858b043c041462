package client_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// A batch submitted again with identical content under a new event id — as the HTTP door
// does for every POST, or a platform that repeats a finished batch after the submissions
// stream's duplicate window — is a no-op for the batcher: no new results, no rejection.
// The batcher says so at once, and SubmitAndWait returns the batch's results from the
// stream on that notice alone: its own ways of finding them (the identical-content
// question, the stream hedge) are pushed out of the wait's reach. The real batcher, gate,
// brain-exec and publisher on an embedded server.
func TestSubmitAndWaitOfAFinishedBatchIsAnsweredOnTheBatchersNotice(t *testing.T) {
	cfg := servicetest.ParseConfig(t, rejectionTestConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := stacktest.NewServer(t)
	srv.StartStack(ctx, app.Options{Config: cfg, Services: []string{contracts.ServicePublisher, contracts.ServiceBrainExec, contracts.ServiceGate, contracts.ServiceBatcher}})
	c := srv.Client

	sub := contracts.BatchSubmission{RunID: "run-again", ThreadID: "thread-1", Step: 1,
		Agent:     contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Narrowing: contracts.NarrowingConfigured,
		Calls:     []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: json.RawMessage(`{"text":"once"}`)}}}
	first, err := c.SubmitAndWait(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Results) != 1 || first.Results[0].Output.Text() != "once" {
		t.Fatalf("results of the first submission: %+v", first.Results)
	}

	client.DelayFallbacks(c, time.Hour)
	// The bound only turns a wait that nothing ends into a failure: without the notice it
	// ends pending.
	again, err := c.SubmitAndWait(ctx, sub, client.WithEventID(client.AttemptEventID(sub)), client.WaitAtMost(30*time.Second))
	if err != nil {
		t.Fatalf("the identical resubmission: %v", err)
	}
	if !reflect.DeepEqual(again, first) {
		t.Fatalf("the identical resubmission returned %+v, want the first submission's %+v", again, first)
	}
}
