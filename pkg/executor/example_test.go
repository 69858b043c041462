package executor_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
	"github.com/awaken-dev/awaken/pkg/executor"
)

// GreetArgs is the argument type of the greet tool: the model-visible JSON Schema is
// derived from it, and a call's arguments are decoded into it strictly.
type GreetArgs struct {
	Name string `json:"name" jsonschema:"minLength=1" desc:"Who to greet."`
}

// A typed Go tool served by your own Brain executor. The host configuration declares the
// tool (where it runs, how a crash is recovered); the executor provides its body.
func Example() {
	const cfgYAML = `
tools:
  - id: greet
    description: Greets someone by name.
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
policy: { default_behavior: allow }
`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The rest of the deployment, in this process and without its stock Brain executor.
	srv, err := devserver.Start(ctx, devserver.Options{ConfigYAML: []byte(cfgYAML), WithoutBrainExec: true})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	cfg, err := executor.ParseConfig([]byte(cfgYAML))
	if err != nil {
		log.Fatal(err)
	}
	x, err := executor.New(cfg, executor.Options{URL: srv.URL, Log: io.Discard})
	if err != nil {
		log.Fatal(err)
	}
	greet := executor.ToolFunc("greet", "Greets someone by name.", contracts.CapabilityReplaySafe,
		func(ctx context.Context, a GreetArgs) (string, error) {
			return "hello, " + a.Name, nil
		})
	if err := executor.Register(x, greet); err != nil {
		log.Fatal(err)
	}
	running, err := x.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer running.Stop(context.Background())

	res, err := srv.Client.SubmitAndWait(ctx, contracts.BatchSubmission{
		RunID: "run-1", ThreadID: "thread-1", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"greet"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "greet", Arguments: []byte(`{"name":"Ada"}`)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Results[0].Output.Text())
	// Output: hello, Ada
}
