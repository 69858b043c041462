package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestLargeOutputByReference: over the pipeline, an output over the inline limit is
// published as a resource_link; GET /v1/objects/{name} (token-protected) serves its bytes,
// pkg/client resolves the link by default and keeps it with KeepLinks.
func TestLargeOutputByReference(t *testing.T) {
	const token = "objects-token"
	h := newHarnessConfig(t, testConfig+"executors: { inline_output_bytes: 1024 }\n", api.Options{Token: token},
		append(app.AllServices(), contracts.ServiceAPI))
	big := strings.Repeat("a large output line\n", 200) // 4000 bytes
	sub := contracts.BatchSubmission{
		RunID: "run-big", ThreadID: "thread-big", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": big}), call("c2", "echo", map[string]string{"text": "small"})},
	}
	res, err := h.client.SubmitAndWait(ctxFor(t, waitLong), sub)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0].Output; got.Text() != big || len(got.Content) != 1 || got.Content[0].Type != contracts.BlockText {
		t.Errorf("the client did not resolve the link: %.200v", got.Content)
	}
	if got := res.Results[1].Output.Text(); got != "small" {
		t.Errorf("small output %q", got)
	}

	linking, err := client.New(h.nc, client.KeepLinks())
	if err != nil {
		t.Fatal(err)
	}
	kept, err := linking.Await(ctxFor(t, waitLong), "run-big", 1)
	if err != nil {
		t.Fatal(err)
	}
	content := kept.Results[0].Output.Content
	if len(content) != 1 || content[0].Type != contracts.BlockResourceLink {
		t.Fatalf("published output %.200v, want one resource_link", content)
	}
	l := content[0]
	if l.URI != "awaken://objects/"+l.Name || l.MimeType != contracts.MimeTypeText || l.Size != int64(len(big)) ||
		!strings.HasPrefix(l.Name, contracts.OperationID("run-big", 1, "c1")+".") {
		t.Errorf("link %+v", l)
	}

	bearer := map[string]string{"Authorization": "Bearer " + token}
	if r := h.do(http.MethodGet, "/v1/objects/"+l.Name, "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("object without the token: %d", r.status)
	}
	r := h.do(http.MethodGet, "/v1/objects/"+l.Name, "", bearer)
	if r.status != http.StatusOK || string(r.body) != big || r.header.Get("Content-Type") != contracts.MimeTypeText {
		t.Errorf("GET object: %d %q, %d bytes", r.status, r.header.Get("Content-Type"), len(r.body))
	}
	if r := h.do(http.MethodGet, "/v1/objects/"+l.Name+"x", "", bearer); r.status != http.StatusNotFound || r.apiError(t).Code != "not_found" {
		t.Errorf("GET unknown object: %d %s", r.status, r.body)
	}
	// The HTTP batch door hands the link on as published.
	r = h.do(http.MethodGet, "/v1/batches/"+contracts.BatchID("run-big", 1)+"/results", "", bearer)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"type":"resource_link"`) {
		t.Errorf("batch results over HTTP: %d %.300s", r.status, r.body)
	}
}
