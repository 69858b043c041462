package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
	"github.com/awaken-dev/awaken/pkg/executor"
)

const customConfig = `
tools:
  - id: shout
    description: Shouts text back.
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: echo
policy:
  default_behavior: allow
`

// TestCustomToolRuns runs the whole pipeline in this process (devserver, without its own
// Brain executor), serves this example's executor against it, and submits a batch as a
// platform does: the typed tool shout runs, bad arguments come back as an error result,
// and a builtin still runs.
func TestCustomToolRuns(t *testing.T) {
	srv := devserver.StartTest(t, devserver.Options{ConfigYAML: []byte(customConfig), WithoutBrainExec: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := executor.ParseConfig([]byte(customConfig))
	if err != nil {
		t.Fatal(err)
	}
	x, err := newExecutor(cfg, executor.Options{URL: srv.URL, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	running, err := x.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := running.Stop(stopCtx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})

	tests := []struct {
		tool, args, want string
		wantErr          bool
	}{
		{"shout", `{"text":"hello"}`, "HELLO!", false},
		{"shout", `{"txt":"hello"}`, "invalid tool arguments: ", true},
		{"echo", `{"text":"still here"}`, "still here", false},
	}
	for i, tt := range tests {
		callID := "call_" + string(rune('a'+i))
		var sub contracts.BatchSubmission
		raw := `{"run_id":"run-custom","thread_id":"t","step":` + string(rune('1'+i)) + `,
			"agent":{"snapshot_id":"s","tools":["shout","echo"]},
			"assistant":[{"type":"tool_use","id":"` + callID + `","name":"` + tt.tool + `","input":` + tt.args + `}],
			"calls":[{"call_id":"` + callID + `","tool_id":"` + tt.tool + `","arguments":` + tt.args + `}]}`
		if err := json.Unmarshal([]byte(raw), &sub); err != nil {
			t.Fatal(err)
		}
		res, err := srv.Client.SubmitAndWait(ctx, sub)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.tool, tt.args, err)
		}
		if len(res.Results) != 1 {
			t.Fatalf("%s %s: %d results", tt.tool, tt.args, len(res.Results))
		}
		got, _ := json.Marshal(res.Results[0])
		out := res.Results[0].Output
		text := out.Text()
		if out.IsError != tt.wantErr || !strings.HasPrefix(text, tt.want) || (!tt.wantErr && text != tt.want) {
			t.Errorf("%s %s: result %s, want %q (error %v)", tt.tool, tt.args, got, tt.want, tt.wantErr)
		}
	}
}
