package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
)

// runTools implements `awaken tools ls [--format awaken|openai|mcp] [--agent-tools a,b]`:
// the tool catalog, asked of the api.
func runTools(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "list") {
		return &usageError{"usage: awaken tools ls [--format awaken|openai|mcp] [--agent-tools a,b]"}
	}
	fs := newFlags("tools ls")
	connect := dialClient(fs)
	format := fs.String("format", "awaken", "catalog format: awaken, openai (a chat-completions tools array) or mcp")
	agentTools := fs.String("agent-tools", "", "comma-separated tool ids to narrow the list to, as a batch's agent.tools does")
	if err := parseArgs(fs, args[1:]); err != nil {
		return err
	}
	var narrow []string
	if *agentTools != "" {
		for _, id := range strings.Split(*agentTools, ",") {
			if id = strings.TrimSpace(id); id != "" {
				narrow = append(narrow, id)
			}
		}
	}
	c, ctx, done, err := connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	doc, err := c.ToolsDocument(ctx, *format, narrow)
	if err != nil {
		return err
	}
	return printJSON(stdout, json.RawMessage(doc))
}
