package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestStreamCarriesProgress: GET /v1/stream forwards a running tool's progress events as
// "progress" events with the published payload, up to the last report.
func TestStreamCarriesProgress(t *testing.T) {
	h := newHarnessConfig(t, "tools:\n  - id: progress\npolicy: {default_behavior: allow}\n", api.Options{},
		append(app.AllServices(), contracts.ServiceAPI))
	events := h.openStream(t)
	events.next(t, "hello", nil)
	h.submitCalls("run-sse-progress", []string{"progress"}, call("c1", "progress", map[string]int{"steps": 5, "ms": 50}))
	data := events.next(t, api.EventProgress, func(d string) bool { return strings.Contains(d, `"progress":5`) })
	var p contracts.ToolProgress
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		t.Fatal(err)
	}
	if p.BatchID != "tool-batch:run-sse-progress:1" || p.CallID != "c1" || p.Total != 5 || p.Message != "step 5 of 5" {
		t.Errorf("progress event %+v", p)
	}
}
