package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestToolsLs runs `awaken tools ls` against brain-exec and the api: the openai format,
// narrowed to echo, carries the schema brain-exec derived from echo's argument type.
func TestToolsLs(t *testing.T) {
	cfg, err := config.Parse([]byte("storage: {memory: true}\ntools:\n  - id: echo\n  - id: counter\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := app.Start(ctx, app.Options{Config: cfg, Services: []string{app.BrainExec, app.API},
		Dial: app.InProcessDialer(srv.Server()), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = st.Stop(stopCtx)
	})
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
	if code := Main(ctx, []string{"tools", "ls", "--nats-url", srv.URL(), "--format", "yaml"}, &out, &errb); code == 0 {
		t.Error("an unknown format succeeded")
	}
}
