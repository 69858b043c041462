package readmodel_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestWriteTimeline: the printed timeline has a row per call with phase and outcome and a
// row per committed stage with its offset, and shows hostile text escaped.
func TestWriteTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	out := contracts.ErrorOutput("c2", "blocked: \x1b[31mred\nline\u202e")
	b := httpapi.BatchView{
		BatchID: "tool-batch:run-1:3", RunID: "run-1", ThreadID: "thread-1", Step: 3,
		Phase: contracts.BatchPhaseOpen, CreatedAt: t0, Terminal: 2,
		Calls: []httpapi.CallView{
			{Index: 0, CallID: "c1", ToolID: "echo", Phase: contracts.PhaseCompleted, Recorded: true, Outcome: contracts.OutcomeCompleted,
				Actor: "alice", Edited: true, Arguments: json.RawMessage(`{"text":"hi"}`), ProposedArguments: json.RawMessage(`{"text":"rm -rf"}`),
				Output:   &contracts.ToolOutput{CallID: "c1", Content: []contracts.ContentBlock{{Type: contracts.BlockText, Text: "hi"}}},
				Timeline: []contracts.TimelineMark{{Stage: "gate.decided", At: t0.Add(4 * time.Millisecond)}, {Stage: "completed", At: t0.Add(1204 * time.Millisecond)}}},
			{Index: 1, CallID: "c2", ToolID: "ask_me", Phase: contracts.PhaseCompleted, Recorded: true, Outcome: contracts.OutcomeCompleted, IsError: true,
				Actor: "nats:\x1bbob", Output: &out, Timeline: []contracts.TimelineMark{{Stage: "awaiting", At: t0.Add(2 * time.Minute)}}},
			{Index: 2, CallID: "c3", ToolID: "counter", Phase: contracts.PhaseIndeterminate, Recorded: true, Outcome: contracts.OutcomeIndeterminate,
				IsError: true, Reason: "cancelled", Timeline: []contracts.TimelineMark{{Stage: "indeterminate", At: t0.Add(3 * time.Minute)}}},
			{Index: 3, CallID: "c4", ToolID: "echo", Phase: contracts.PhaseRequested, Timeline: []contracts.TimelineMark{}},
			// Actors no door authenticated (a command on the public resume subject).
			{Index: 4, CallID: "c5", ToolID: "ask_me", Phase: contracts.PhaseCompleted, Recorded: true, Outcome: contracts.OutcomeCompleted,
				Actor: "mallory", ActorClaimed: true, Timeline: []contracts.TimelineMark{}},
			{Index: 5, CallID: "c6", ToolID: "ask_me", Phase: contracts.PhaseCompleted, Recorded: true, Outcome: contracts.OutcomeCompleted,
				ActorClaimed: true, Timeline: []contracts.TimelineMark{}},
		},
	}
	var buf bytes.Buffer
	if err := readmodel.WriteTimeline(&buf, b); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, want := range []string{
		`(?m)^batch\s+tool-batch:run-1:3$`,
		`(?m)^phase\s+open \(2 of 6 calls terminal\)$`,
		`(?m)^created\s+2026-01-02T10:00:00\.000Z$`,
		`(?m)^0\s+c1\s+echo\s+Completed\s+completed: hi\s+alice \(edited arguments\)$`,
		`(?m)^0\s+c1\s+proposed arguments\s+\{"text":"rm -rf"\}$`,
		`(?m)^0\s+c1\s+approved arguments\s+\{"text":"hi"\}$`,
		`(?m)^1\s+c2\s+ask_me\s+Completed\s+completed \(error\): blocked: \\x1b\[31mred\\nline\\u202e\s+nats:\\x1bbob$`,
		`(?m)^2\s+c3\s+counter\s+Indeterminate\s+indeterminate \(error\): cancelled\s+-$`,
		`(?m)^3\s+c4\s+echo\s+Requested\s+-\s+-$`,
		`(?m)^4\s+c5\s+ask_me\s+Completed\s+completed\s+mallory \(claimed\)$`,
		`(?m)^5\s+c6\s+ask_me\s+Completed\s+completed\s+\(unnamed, claimed\)$`,
		`(?m)^0\s+c1\s+gate\.decided\s+2026-01-02T10:00:00\.004Z\s+\+4ms$`,
		`(?m)^0\s+c1\s+completed\s+2026-01-02T10:00:01\.204Z\s+\+1\.204s$`,
		`(?m)^1\s+c2\s+awaiting\s+2026-01-02T10:02:00\.000Z\s+\+2m0s$`,
		`(?m)^3\s+c4\s+\(not gated yet\)\s+-\s+-$`,
	} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("timeline lacks %s:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\x1b\u202e") {
		t.Errorf("timeline carries raw control characters:\n%q", got)
	}
}
