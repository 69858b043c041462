package brainexec

import (
	"slices"
	"testing"

	"github.com/awaken-dev/awaken/internal/config"
)

func TestMCPServers_relativeCommandsResolveAgainstTheConfigFile(t *testing.T) {
	cfg := &config.Config{Dir: "/etc/awaken", Executors: config.Executors{MCP: []config.MCPServer{
		{Name: "rel", Command: "./bin/gh-mcp", Args: []string{"./not-a-command"}},
		{Name: "nested", Command: "tools/mcp"},
		{Name: "abs", Command: "/usr/local/bin/mcp"},
		{Name: "path", Command: "npx", Args: []string{"-y", "server"}},
		{Name: "web", URL: "http://localhost:9000/mcp"},
	}}}
	var got []string
	for _, s := range mcpServers(cfg) {
		got = append(got, s.Command)
	}
	want := []string{"/etc/awaken/bin/gh-mcp", "/etc/awaken/tools/mcp", "/usr/local/bin/mcp", "npx", ""}
	if !slices.Equal(got, want) {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if cfg.Executors.MCP[0].Command != "./bin/gh-mcp" {
		t.Fatal("the configuration was modified")
	}
	// A configuration parsed from memory has no directory: commands stay as written.
	cfg.Dir = ""
	if s := mcpServers(cfg); s[0].Command != "./bin/gh-mcp" {
		t.Fatalf("without a directory: %q", s[0].Command)
	}
}
