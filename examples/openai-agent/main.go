// Command openai-agent is an agent loop on the official OpenAI Go SDK whose tool calls run
// in awaken: the catalog is offered to the model, each turn's tool calls are one awaken
// batch, and the results go back as tool messages until the model answers in text.
//
//	awaken dev &                                   # awaken with the api (examples/awaken.yaml)
//	OPENAI_API_KEY=… go run . "count the words in 'to be or not to be'"
//
// Environment: NATS_URL (default nats://127.0.0.1:4222), OPENAI_MODEL (default gpt-4.1),
// OPENAI_BASE_URL (any OpenAI-compatible server). A call that needs an approval waits until
// someone approves it (`awaken tickets approve …` or the console).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/openai/openai-go/v3"

	adapter "github.com/awaken-dev/awaken/adapters/openai"
	"github.com/awaken-dev/awaken/pkg/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "openai-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: openai-agent PROMPT")
	}
	ctx := context.Background()
	url := os.Getenv("NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	aw, err := client.Dial(url)
	if err != nil {
		return err
	}
	defer aw.Close()
	tools, names, err := adapter.ChatTools(ctx, aw, nil, false)
	if err != nil {
		return err
	}
	offered := make([]string, 0, len(names))
	for name := range names {
		offered = append(offered, name)
	}
	model := os.Getenv("OPENAI_MODEL")
	if model == "" {
		model = "gpt-4.1"
	}
	oc := openai.NewClient() // OPENAI_API_KEY, OPENAI_BASE_URL
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(os.Args[1])},
		Tools:    tools,
	}
	runID := "openai-agent-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for step := int64(1); step <= 16; step++ {
		resp, err := oc.Chat.Completions.New(ctx, params)
		if err != nil {
			return err
		}
		msg := resp.Choices[0].Message
		calls := adapter.ChatCalls(msg)
		if len(calls) == 0 {
			fmt.Println(msg.Content)
			return nil
		}
		res, err := aw.SubmitAndWait(ctx, adapter.Submission(runID, runID, "openai-agent", step, offered, calls))
		if err != nil {
			return err
		}
		params.Messages = append(params.Messages, msg.ToParam())
		params.Messages = append(params.Messages, adapter.ToolMessages(res)...)
	}
	return fmt.Errorf("no answer after 16 turns")
}
