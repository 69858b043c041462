//go:build unix

package mcpbridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestPipeline_mcpStructuredContentIsPublished runs every service and the api with a real
// MCP server whose tools answer in structuredContent, submits one batch calling them
// (one by its provider-safe name), and reads the batch back through both doors that
// decode its stored call records: the published results and GET /v1/batches/{id}. Each
// keeps the structured content whole, as the executor committed it.
func TestPipeline_mcpStructuredContentIsPublished(t *testing.T) {
	log := newCallLog(t)
	ctx, stack := startPipeline(t, app.Options{Services: withAPI()}, `
policy: {default_behavior: allow}
executors:
  mcp:
    - {name: test, command: %q, args: ["-log", %q]}
`, serverBin, string(log))
	c := stack.client
	safe := contracts.SafeToolName("mcp__test__lookup (structured)")
	tools := []string{"mcp__test__structured", "mcp__test__graph", safe}
	sub := contracts.BatchSubmission{
		RunID: "run-structured", ThreadID: "thread-1", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: []contracts.ToolCall{
			{CallID: "c1", ToolID: "mcp__test__structured", Arguments: json.RawMessage(`{}`)},
			{CallID: "c2", ToolID: "mcp__test__graph", Arguments: json.RawMessage(`{}`)},
			{CallID: "c3", ToolID: safe, Arguments: json.RawMessage(`"{\"city\":\"Lisbon\"}"`)},
		},
	}
	want := map[string]string{
		"c1": `{"answer":42}`,
		"c2": `{"entities":[{"entityType":"person","name":"Ada","observations":["wrote the first program"]}]}`,
		"c3": `{"city":"Lisbon","conditions":["sunny"],"temperature":21.5}`,
	}
	checkStructured := func(where, callID string, out *contracts.ToolOutput) {
		t.Helper()
		if out == nil {
			t.Errorf("%s: %s has no output", where, callID)
			return
		}
		var got, wantValue any
		_ = json.Unmarshal([]byte(want[callID]), &wantValue)
		if err := json.Unmarshal(out.StructuredContent, &got); err != nil || !reflect.DeepEqual(got, wantValue) {
			t.Errorf("%s: %s structured_content %s, want %s", where, callID, out.StructuredContent, want[callID])
		}
		if out.IsError || !strings.Contains(out.Text(), `"`) {
			t.Errorf("%s: %s output %+v: want a success whose content carries the JSON too", where, callID, out)
		}
	}

	wctx, wcancel := context.WithTimeout(ctx, waitTimeout)
	defer wcancel()
	res, err := c.SubmitAndWait(wctx, sub)
	if err != nil {
		t.Errorf("the batch's results: %v", err)
	} else {
		if len(res.Results) != len(sub.Calls) {
			t.Fatalf("%d results, want %d", len(res.Results), len(sub.Calls))
		}
		for _, r := range res.Results {
			checkStructured("published results", r.CallID, &r.Output)
		}
		if r := res.Results[2]; r.ToolID != "mcp__test__lookup (structured)" {
			t.Errorf("the safe name ran %q", r.ToolID)
		}
	}

	// The api's read of the stored records: 200, with each output whole. The publisher
	// archives the batch as published after its results are out (off the platform's path),
	// so the view is read until it says published: the archive is decoded too.
	base := strings.TrimSuffix(stack.APIService.URL(), "/")
	var view httpapi.BatchView
	natstest.WaitFor(t, 20*time.Second, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/batches/"+sub.BatchID(), nil)
		hres, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer hres.Body.Close()
		body, _ := io.ReadAll(hres.Body)
		if hres.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/batches/%s: %d %s", sub.BatchID(), hres.StatusCode, body)
		}
		view = httpapi.BatchView{}
		if err := json.Unmarshal(body, &view); err != nil {
			t.Fatalf("batch view: %v: %s", err, body)
		}
		return view.Phase == contracts.BatchPhasePublished
	}, "the batch view to say published")
	if len(view.Calls) != len(sub.Calls) {
		t.Fatalf("batch view with %d calls, want %d", len(view.Calls), len(sub.Calls))
	}
	for _, cv := range view.Calls {
		checkStructured("GET /v1/batches/{id}", cv.CallID, cv.Output)
	}
}
