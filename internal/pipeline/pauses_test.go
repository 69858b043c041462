package pipeline_test

import (
	"errors"
	"testing"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPauseRecordsDecodeStrictly: a pause record the api did not write — the tool catalog
// a forged reply once stored under a pause key, trailing data, another tool's id, no pause
// time — is refused: the tool is not paused, for the gate's read and the catalog's list
// alike. A record the api writes is a pause.
func TestPauseRecordsDecodeStrictly(t *testing.T) {
	kit, ctx := echoKit(t, "gate")
	kv, err := kit.JS.KeyValue(ctx, kit.Env.Names.ToolPausesBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := contracts.ToolPauseKey("echo")
	for _, bad := range []string{
		`{"tools":[{"id":"echo","description":"echoes"}]}`,
		`{"tool_id":"echo","paused_at":"2026-01-01T00:00:00Z"} {}`,
		`{"tool_id":"other","paused_at":"2026-01-01T00:00:00Z"}`,
		`{"tool_id":"echo"}`,
		``,
	} {
		if _, err := kv.Put(ctx, key, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		p, err := kit.Env.ToolPaused(ctx, "echo")
		if err != nil || p != nil {
			t.Errorf("record %q: ToolPaused = %+v, %v; want not paused", bad, p, err)
		}
		all, err := kit.Env.ToolPauses(ctx)
		if err != nil || len(all) != 0 {
			t.Errorf("record %q: ToolPauses = %+v, %v; want none", bad, all, err)
		}
		if _, err := pipeline.DecodeToolPause([]byte(bad), key); !errors.Is(err, pipeline.ErrInvalidPauseRecord) {
			t.Errorf("record %q: DecodeToolPause error %v, want ErrInvalidPauseRecord", bad, err)
		}
	}
	good := `{"tool_id":"echo","reason":"incident","actor":"alice","paused_at":"2026-01-01T00:00:00Z"}`
	if _, err := kv.Put(ctx, key, []byte(good)); err != nil {
		t.Fatal(err)
	}
	if p, err := kit.Env.ToolPaused(ctx, "echo"); err != nil || p == nil || p.Reason != "incident" {
		t.Fatalf("ToolPaused = %+v, %v; want the pause", p, err)
	}
}
