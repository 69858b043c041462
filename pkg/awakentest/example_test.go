package awakentest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/awaken-dev/awaken/pkg/awakentest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Run the whole deployment in containers, submit a batch, then kill and restart a
// service as a fault test would. It needs a Docker engine (the images are built FROM
// scratch when missing) and takes about a minute, so this example is compiled but not run
// by `go test`; the package's tests run the same steps.
func ExampleRun() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := awakentest.Run(ctx, awakentest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Terminate(context.Background()) // nothing else removes the containers

	sub := contracts.BatchSubmission{RunID: "run-1", ThreadID: "thread-1", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: []byte(`{"text":"hello"}`)}}}
	res, err := d.Client.SubmitAndWait(ctx, sub)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Results[0].Output.Text())

	// A crash of brain-exec: its in-flight messages are redelivered once it is back.
	if err := d.Kill(ctx, awakentest.BrainExec); err != nil {
		log.Fatal(err)
	}
	if err := d.Start(ctx, awakentest.BrainExec); err != nil {
		log.Fatal(err)
	}
}
