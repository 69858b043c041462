package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestCatalogListsAShadowedMCPToolOnce: an MCP tool id two
// configured servers' prefixes cover is listed once.
func TestCatalogListsAShadowedMCPToolOnce(t *testing.T) {
	// Server gh's prefix mcp__gh__ also covers the tools of server gh_
	// (mcp__gh___…): brain-exec publishes such a tool once, for the server that owns it.
	const cfg = `
prefix: awaken
tools:
  - id: echo
executors:
  mcp:
    - {name: gh, command: ./gh-mcp}
    - {name: gh_, command: ./x-mcp}
`
	h := newHarnessConfig(t, cfg, api.Options{}, []string{contracts.ServiceAPI})
	ctx := context.Background()
	kv, err := h.srv.JS.KeyValue(ctx, contracts.NewNames("").ToolsBucket())
	if err != nil {
		t.Fatal(err)
	}
	descs, _ := json.Marshal([]contracts.ToolDescriptor{
		{ID: "mcp__gh___create_issue", Description: "from the server", Parameters: json.RawMessage(`{"type":"object"}`), Kind: contracts.KindRegular, RecoveryPolicy: contracts.DefaultRecoveryPolicy()},
		{ID: "mcp__gh__list_issues", Description: "from the server", Parameters: json.RawMessage(`{"type":"object"}`), Kind: contracts.KindRegular, RecoveryPolicy: contracts.DefaultRecoveryPolicy()},
	})
	if _, err := kv.Put(ctx, contracts.ToolDescriptorsKey(contracts.TargetBrain), descs); err != nil {
		t.Fatal(err)
	}
	var cat contracts.ToolCatalog
	r := h.get("/v1/tools")
	if err := json.Unmarshal(r.body, &cat); err != nil {
		t.Fatalf("GET /v1/tools: %d %s", r.status, r.body)
	}
	seen := map[string]int{}
	for _, tl := range cat.Tools {
		seen[tl.ID]++
	}
	if seen["mcp__gh___create_issue"] != 1 || seen["mcp__gh__list_issues"] != 1 {
		t.Fatalf("catalog ids %v, want each MCP id once: %s", seen, r.body)
	}
}
