package cli

import (
	"context"
	"flag"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// toolsLsCommand implements `awaken tools ls [--format …] [--strict] [--agent-tools a,b]`: the
// tool catalog (the awaken format marks paused tools; the provider formats and mcp omit
// them).
func toolsLsCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	connect := dialClient(fs)
	format := fs.String("format", contracts.CatalogFormatAwaken, "catalog format: "+contracts.CatalogFormatsText())
	strict := fs.Bool("strict", false, "openai formats: strict schemas (closed objects, every property required) where a tool's schema allows it")
	agentTools := fs.String("agent-tools", "", "comma-separated tool ids to narrow the list to, as a batch's agent.tools does")
	asJSON := jsonFlag(fs, stdout)
	return func(ctx context.Context, _ []string) error {
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
		return renderCatalog(stdout, *format, doc, *asJSON)
	}
}

// toolsPauseCommand implements `awaken tools pause TOOL_ID [--reason TEXT]` and `awaken tools
// resume TOOL_ID`: the kill switch of one tool. The audit record names the actor --as
// (default: the local user name).
func toolsPauseCommand(verb string) func(fs *flag.FlagSet, io cmdIO) runner {
	return func(fs *flag.FlagSet, io cmdIO) runner {
		stdout := io.stdout
		connect := dialClient(fs)
		reason := new(string)
		if verb == "pause" {
			reason = fs.String("reason", "", "why the tool is paused (the model reads it in the blocked calls' output)")
		}
		as := fs.String("as", env("AWAKEN_ACTOR", defaultActor()), "who pauses or resumes, for the audit record (env AWAKEN_ACTOR; default: the OS user)")
		asJSON := jsonFlag(fs, stdout)
		return func(ctx context.Context, _ []string) error {
			if fs.NArg() != 1 {
				return &usageError{"usage: awaken tools " + verb + " TOOL_ID"}
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
			return renderPause(stdout, st, *asJSON)
		}
	}
}
