package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

const toolsUsage = "usage: awaken tools ls [--format awaken|openai|openai-responses|anthropic|mcp] [--strict] [--agent-tools a,b] | " +
	"awaken tools pause TOOL_ID [--reason TEXT] | awaken tools resume TOOL_ID"

// runTools implements `awaken tools ls|pause|resume`, asked of the api.
func runTools(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return &usageError{toolsUsage}
	}
	switch args[0] {
	case "ls", "list":
		return runToolsLs(ctx, args[1:], stdout)
	case "pause", "resume":
		return runToolsPause(ctx, args[0], args[1:], stdout)
	}
	return &usageError{toolsUsage}
}

// runToolsLs implements `awaken tools ls [--format …] [--strict] [--agent-tools a,b]`: the
// tool catalog (the awaken format marks paused tools; the provider formats and mcp omit
// them).
func runToolsLs(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("tools ls")
	connect := dialClient(fs)
	format := fs.String("format", "awaken", "catalog format: awaken, openai (Chat Completions tools), openai-responses (Responses function tools), anthropic (Messages tools) or mcp")
	strict := fs.Bool("strict", false, "openai formats: strict schemas (closed objects, every property required) where a tool's schema allows it")
	agentTools := fs.String("agent-tools", "", "comma-separated tool ids to narrow the list to, as a batch's agent.tools does")
	if err := parseArgs(fs, args); err != nil {
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
	doc, err := c.ToolsFor(ctx, contracts.ToolsRequest{Format: *format, AgentTools: narrow, Strict: *strict})
	if err != nil {
		return err
	}
	return printJSON(stdout, json.RawMessage(doc))
}

// runToolsPause implements `awaken tools pause TOOL_ID [--reason TEXT]` and `awaken tools
// resume TOOL_ID`: the kill switch of one tool. The audit record names the actor --as
// (default: the local user name).
func runToolsPause(ctx context.Context, verb string, args []string, stdout io.Writer) error {
	fs := newFlags("tools " + verb)
	connect := dialClient(fs)
	reason := new(string)
	if verb == "pause" {
		reason = fs.String("reason", "", "why the tool is paused (the model reads it in the blocked calls' output)")
	}
	as := fs.String("as", env("AWAKEN_ACTOR", defaultActor()), "who pauses or resumes, for the audit record (env AWAKEN_ACTOR; default: the OS user)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{toolsUsage}
	}
	c, ctx, done, err := connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	var st contracts.ToolPauseState
	if verb == "pause" {
		st, err = c.PauseTool(ctx, fs.Arg(0), *reason, *as)
	} else {
		st, err = c.ResumeTool(ctx, fs.Arg(0), *as)
	}
	if err != nil {
		return err
	}
	return printJSON(stdout, st)
}
