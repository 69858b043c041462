package brainexec

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/awaken-dev/awaken/internal/config"

	"github.com/awaken-dev/awaken/internal/mcpbridge"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// MCPMount is the name under which brain-exec mounts the tools of the configured MCP
// servers in its registry (see [toolreg.Registry.MountDynamic]).
const MCPMount = "mcp"

// mcpTools serves the tools of the configured MCP servers (mcp__{server}__{tool}) as a
// dynamic family: their set is what the servers list now, so a server that comes up after
// Start is callable without re-registration.
type mcpTools struct{ b *mcpbridge.Bridge }

// Owns reports whether id names a tool of a configured MCP server.
func (m mcpTools) Owns(id string) bool { return m.b.Owns(id) }

// Descriptors lists the tools of every reachable server.
func (m mcpTools) Descriptors(ctx context.Context) []contracts.ToolDescriptor {
	return m.b.Descriptors(ctx)
}

// Invoke calls the tool on its server with the operation id in the request _meta. The
// body start is recorded once the session is up and the tool is known, immediately before
// the request is handed to the transport, so a server that is down never counts as a body
// run.
func (m mcpTools) Invoke(ctx context.Context, id string, args json.RawMessage, inv tool.Invocation) (contracts.ToolOutput, error) {
	ctx = mcpbridge.WithBeforeDispatch(ctx, inv.BeginBody)
	// The server's notifications/progress become the call's progress events.
	ctx = mcpbridge.WithProgress(ctx, func(progress, total float64, message string) {
		tool.ReportProgress(ctx, progress, total, message)
	})
	return m.b.Invoke(ctx, id, args, inv.OperationID)
}

// MCPStatus reports the state of the configured MCP servers (nil when none is configured).
func (s *Service) MCPStatus() []mcpbridge.ServerStatus {
	if s.mcp == nil {
		return nil
	}
	return s.mcp.Status()
}

// mcpServers returns the configured MCP servers with relative command paths resolved
// against the directory of the configuration file, as sandbox module paths are: a command
// containing a path separator that is not absolute ("./bin/gh-mcp") is relative to the
// file, a bare name ("npx") is looked up in PATH when the server starts.
func mcpServers(cfg *config.Config) []config.MCPServer {
	out := make([]config.MCPServer, len(cfg.Executors.MCP))
	for i, s := range cfg.Executors.MCP {
		if cfg.Dir != "" && s.Command != "" && !filepath.IsAbs(s.Command) &&
			strings.ContainsRune(filepath.ToSlash(s.Command), '/') {
			s.Command = filepath.Join(cfg.Dir, s.Command)
		}
		out[i] = s
	}
	return out
}
