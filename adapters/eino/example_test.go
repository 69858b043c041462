package eino_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	adapter "github.com/awaken-dev/awaken/adapters/eino"
	"github.com/awaken-dev/awaken/pkg/client"
)

// chatModel stands for any Eino chat model that calls tools (an eino-ext provider's, for
// one); the example builds and does not run.
var chatModel model.ToolCallingChatModel

// An Eino agent whose tool calls run in awaken (`awaken dev` with the api): the catalog is
// bound to the model, each turn's tool calls are one awaken batch of the run, and the
// results go back to the model as tool messages until it answers in text. A call that
// needs an approval waits until someone approves it (`awaken tickets approve …` or the
// console).
func ExampleNewAgent() {
	ctx := context.Background()
	aw, err := client.Dial("nats://127.0.0.1:4222")
	if err != nil {
		panic(err)
	}
	defer aw.Close()
	tools, names, err := adapter.Tools(ctx, aw, nil)
	if err != nil {
		panic(err)
	}
	runID := "eino-agent-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run := &adapter.Run{Client: aw, ID: runID, ThreadID: runID, SnapshotID: "eino-agent", Tools: names.Offered()}
	agent, err := adapter.NewAgent(ctx, chatModel, tools, run, compose.WithMaxRunSteps(32))
	if err != nil {
		panic(err)
	}
	answer, err := agent.Invoke(ctx, []*schema.Message{schema.UserMessage("count the words in 'to be or not to be'")})
	if err != nil {
		panic(err)
	}
	fmt.Println(answer.Content)
}

// The awaken tools node in a graph of one's own, where Eino's ToolsNode would be: an
// assistant message in, its tool messages out.
func ExampleRun_ToolsNode() {
	var aw *client.Client // dialed as in the example of NewAgent
	run := &adapter.Run{Client: aw, ID: "run-1", ThreadID: "thread-1", SnapshotID: "my-agent", Tools: []string{"echo"}}
	g := compose.NewGraph[*schema.Message, []*schema.Message]()
	if err := g.AddLambdaNode("tools", run.ToolsNode()); err != nil {
		panic(err)
	}
	_ = g.AddEdge(compose.START, "tools")
	_ = g.AddEdge("tools", compose.END)
}
