package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestToolsLs runs `awaken tools ls` against brain-exec and the api: the openai format,
// narrowed to echo, carries the schema brain-exec derived from echo's argument type.
func TestToolsLs(t *testing.T) {
	cfg := parseConfig(t, "storage: {memory: true}\ntools:\n  - id: echo\n  - id: counter\n")
	ctx := servicetest.Context(t, time.Minute)
	srv, _ := startStack(t, ctx, cfg, contracts.ServiceBrainExec, contracts.ServiceAPI)
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"tools", "ls", "--nats-url", srv.URL(), "--format", "openai", "--agent-tools", "echo"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct {
		Tools []contracts.OpenAITool `json:"tools"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(doc.Tools) != 1 || doc.Tools[0].Type != "function" || doc.Tools[0].Function.Name != "echo" ||
		!bytes.Contains(doc.Tools[0].Function.Parameters, []byte(`"text"`)) {
		t.Errorf("tools ls: %s", out.String())
	}
	// The Responses format, strict: flat function tools with closed schemas.
	out.Reset()
	if code := Main(ctx, []string{"tools", "ls", "--nats-url", srv.URL(), "--format", "openai-responses", "--strict", "--agent-tools", "echo"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var responses contracts.ProviderCatalog[contracts.OpenAIResponsesTool]
	if err := json.Unmarshal(out.Bytes(), &responses); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	var params map[string]any
	if len(responses.Tools) == 1 {
		_ = json.Unmarshal(responses.Tools[0].Parameters, &params)
	}
	if len(responses.Tools) != 1 || responses.Tools[0].Name != "echo" || responses.Tools[0].Strict == nil || !*responses.Tools[0].Strict ||
		params["additionalProperties"] != false || responses.Names["echo"] != "echo" {
		t.Errorf("tools ls --format openai-responses --strict: %s", out.String())
	}
	if code := Main(ctx, []string{"tools", "ls", "--nats-url", srv.URL(), "--format", "yaml"}, &out, &errb); code == 0 {
		t.Error("an unknown format succeeded")
	}

	// The kill switch: pause with a reason and the actor of --as, see it in the catalog, resume.
	out.Reset()
	if code := Main(ctx, []string{"tools", "pause", "echo", "--nats-url", srv.URL(), "--reason", "bad deploy", "--as", "ops"}, &out, &errb); code != 0 {
		t.Fatalf("tools pause: exit %d: %s", code, errb.String())
	}
	var ps contracts.ToolPauseState
	if err := json.Unmarshal(out.Bytes(), &ps); err != nil || !ps.Paused || ps.Pause.Reason != "bad deploy" || ps.Pause.Actor != "nats as ops" {
		t.Errorf("tools pause: %s %v", out.String(), err)
	}
	out.Reset()
	if code := Main(ctx, []string{"tools", "ls", "--nats-url", srv.URL()}, &out, &errb); code != 0 {
		t.Fatalf("tools ls: exit %d: %s", code, errb.String())
	}
	var cat contracts.ToolCatalog
	if err := json.Unmarshal(out.Bytes(), &cat); err != nil || len(cat.Tools) != 2 || !cat.Tools[0].Paused || cat.Tools[1].Paused {
		t.Errorf("tools ls while echo is paused: %s %v", out.String(), err)
	}
	out.Reset()
	if code := Main(ctx, []string{"tools", "resume", "echo", "--nats-url", srv.URL()}, &out, &errb); code != 0 {
		t.Fatalf("tools resume: exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &ps); err != nil || ps.Paused {
		t.Errorf("tools resume: %s %v", out.String(), err)
	}
}
