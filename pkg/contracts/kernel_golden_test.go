package contracts

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/awaken-dev/awaken/internal/goldentest"
)

// The golden files of the durable state machine (testdata/golden/{phase_*,call_record_*,
// batch_record_*}.json) are rewritten instead of compared under -update
// ([goldentest.Check]):
//
//	go test ./pkg/contracts/ -run TestKernelGolden -update
//
// Review the diff of testdata/golden/ before committing: the files pin the stored form of
// the records, and a change to them is a storage format change that existing records on
// disk must survive.

func goldenKernelFixtures(t *testing.T) map[string]any {
	t.Helper()
	completed := ToolOutput{
		CallID: "call-1",
		Content: []ContentBlock{
			{Type: BlockText, Text: "3 files"},
			{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "https://example.invalid/plot.png"}},
		},
		State: []Command{{Key: "files.count", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet, Value: json.RawMessage(`3`)}}},
	}
	b := &BatchRecord{
		Submission: BatchSubmission{RunID: "run-7", ThreadID: "thread-1", Step: 3,
			Agent: AgentSnapshot{SnapshotID: "snapshot-1", Tools: []string{"glob", "bash"}},
			Calls: []ToolCall{
				{CallID: "call-1", ToolID: "glob", Arguments: json.RawMessage(`{"pattern":"*.go"}`)},
				{CallID: "call-2", ToolID: "bash", Arguments: json.RawMessage(`{"command":"rm -rf build"}`)},
			}},
		Hash:      "0123456789abcdef",
		Pinned:    []PinnedCall{{Known: true, Target: TargetBrain, Kind: KindRegular, Policy: btPolicy(ModeReplaySafe, 3)}, {Known: true, Target: TargetBrain, Kind: KindRegular, Policy: btPolicy(ModeNeverReplay, 1)}},
		Phase:     BatchPhaseOpen,
		CreatedAt: btAt,
	}
	corr := CorrelationID(ReasonPermission, "run-7", 3, "call-2")
	done := NewCallRecord(0, b.Submission.Calls[0], b.Pinned[0].Policy)
	btMust(t,
		done.Decide(&GateOutcome{Kind: GateAllow}, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", btAt),
		done.Dispatch(btAt),
		done.Enter(42, btAt),
		done.Complete(completed, btAt),
	)
	parked := NewCallRecord(1, b.Submission.Calls[1], b.Pinned[1].Policy)
	btMust(t,
		parked.Decide(&GateOutcome{Kind: GateRequireConfirmation, CorrelationID: corr}, "", btAt),
		parked.Park(WaitToolPermission, corr, btAt),
	)
	sealed := parked
	sealed.Timeline = append([]TimelineMark(nil), parked.Timeline...)
	btMust(t, sealed.MarkIndeterminate("run cancelled", btAt))
	return map[string]any{
		"phase_requested":       RequestedPhase(),
		"phase_executing":       ExecutingPhase(2),
		"phase_awaiting":        AwaitingPhase(WaitToolPermission, corr),
		"phase_completed":       CompletedPhase(completed),
		"phase_indeterminate":   IndeterminatePhase("owner lease expired after the executor was entered"),
		"call_record_completed": done,
		"call_record_awaiting":  parked,
		"call_record_sealed":    sealed,
		"batch_record_open":     b,
	}
}

// TestKernelGolden pins the stored JSON of every ToolCallPhase variant, of call records
// as the transitions leave them and of a batch record, and checks that each golden file
// decodes to a value that encodes to the same bytes (records already on disk stay
// readable).
func TestKernelGolden(t *testing.T) {
	for name, v := range goldenKernelFixtures(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", name+".json")
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			goldentest.Check(t, path, got) // from here on, got is the golden file's content
			var back any
			switch v.(type) {
			case ToolCallPhase:
				back = new(ToolCallPhase)
			case CallRecord:
				back = new(CallRecord)
			case *BatchRecord:
				back = new(BatchRecord)
			default:
				t.Fatalf("no decoder for %T", v)
			}
			if err := json.Unmarshal(got, back); err != nil {
				t.Fatalf("golden file does not decode: %v", err)
			}
			again, err := json.MarshalIndent(back, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(again, '\n'), got) {
				t.Fatalf("round trip differs:\n%s", again)
			}
		})
	}
}
