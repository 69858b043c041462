// Command anthropic-agent is an agent loop on the official Anthropic Go SDK whose tool
// calls run in awaken: the catalog is offered to the model, each turn's tool_use blocks are
// one awaken batch, and the results go back as tool_result blocks until the model answers
// in text.
//
//	awaken dev &                                   # awaken with the api (examples/awaken.yaml)
//	ANTHROPIC_API_KEY=… go run . "count the words in 'to be or not to be'"
//
// Environment: NATS_URL (default nats://127.0.0.1:4222), ANTHROPIC_MODEL (default
// claude-sonnet-4-5). A call that needs an approval waits until someone approves it.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	adapter "github.com/awaken-dev/awaken/adapters/anthropic"
	"github.com/awaken-dev/awaken/pkg/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "anthropic-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: anthropic-agent PROMPT")
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
	tools, names, err := adapter.Tools(ctx, aw, nil)
	if err != nil {
		return err
	}
	offered := make([]string, 0, len(names))
	for name := range names {
		offered = append(offered, name)
	}
	model := os.Getenv("ANTHROPIC_MODEL")
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	ac := anthropic.NewClient() // ANTHROPIC_API_KEY
	params := anthropic.MessageNewParams{
		Model: anthropic.Model(model), MaxTokens: 4096, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(os.Args[1]))},
	}
	runID := "anthropic-agent-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for step := int64(1); step <= 16; step++ {
		msg, err := ac.Messages.New(ctx, params)
		if err != nil {
			return err
		}
		calls := adapter.Calls(msg)
		if len(calls) == 0 {
			var text []string
			for _, b := range msg.Content {
				if b.Type == "text" {
					text = append(text, b.Text)
				}
			}
			fmt.Println(strings.Join(text, "\n"))
			return nil
		}
		res, err := aw.SubmitAndWait(ctx, adapter.Submission(runID, runID, "anthropic-agent", step, offered, calls))
		if err != nil {
			return err
		}
		params.Messages = append(params.Messages, msg.ToParam(), adapter.ResultMessage(res))
	}
	return fmt.Errorf("no answer after 16 turns")
}
