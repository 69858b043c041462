package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/execcore/exectest"
)

const customConfig = `
tools:
  - id: shout
    description: Shouts text back.
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: echo
`

// TestCustomToolRuns starts the example against an embedded server and proves a call to
// its own typed tool runs (and a builtin still does).
func TestCustomToolRuns(t *testing.T) {
	e := exectest.New(t, customConfig)
	path := filepath.Join(t.TempDir(), "awaken.yaml")
	if err := os.WriteFile(path, []byte(customConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, e.Server.URL(), path, zerolog.Nop()) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return after cancellation")
		}
	}
	t.Cleanup(stop)

	tests := []struct {
		tool, args, want string
		wantErr          bool
	}{
		{"shout", `{"text":"hello"}`, "HELLO!", false},
		{"shout", `{"txt":"hello"}`, "invalid tool arguments: ", true},
		{"echo", `{"text":"still here"}`, "still here", false},
	}
	for i, tt := range tests {
		c := exectest.Call{RunID: "run-1", Step: 1, CallID: "call_" + string(rune('a'+i)), ToolID: tt.tool, Args: tt.args}
		e.Allow(c)
		got, isErr := exectest.Text(t, e.WaitTerminal(c))
		if isErr != tt.wantErr || !strings.HasPrefix(got, tt.want) || (!tt.wantErr && got != tt.want) {
			t.Errorf("%s %s: output %q (error %v), want %q", tt.tool, tt.args, got, isErr, tt.want)
		}
	}
	stop()
}
