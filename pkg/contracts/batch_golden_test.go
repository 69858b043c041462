package contracts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// updateBatchGolden rewrites the golden files of the batch state machine instead of
// comparing against them:
//
//	go test ./pkg/contracts/ -run TestBatchGolden -update-batch
//
// It has its own name (not -update) because other golden tests of this package are written
// in parallel and a flag may be declared only once per test binary. Review the diff of
// testdata/golden/ before committing: the files pin the persisted wire form, and a change
// to them is a storage format change.
var updateBatchGolden = flag.Bool("update-batch", false, "rewrite pkg/contracts/testdata/golden/{phase_*,tool_batch_*}.json")

func goldenBatchFixtures(t *testing.T) map[string]any {
	t.Helper()
	completed := ToolOutput{
		CallID: "call-1",
		Content: []ContentBlock{
			{Type: BlockText, Text: "3 files"},
			{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "https://example.invalid/plot.png"}},
		},
		State: []Command{{Key: "files.count", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet, Value: json.RawMessage(`3`)}}},
	}
	calls := []DurableToolCall{
		{Call: ToolCall{CallID: "call-1", ToolID: "glob", Arguments: json.RawMessage(`{"pattern":"*.go"}`)}, RecoveryPolicy: btPolicy(ModeReplaySafe, 3), Phase: RequestedPhase()},
		{Call: ToolCall{CallID: "call-2", ToolID: "bash", Arguments: json.RawMessage(`{"command":"rm -rf build"}`)}, RecoveryPolicy: btPolicy(ModeNeverReplay, 1), Phase: RequestedPhase()},
		{Call: ToolCall{CallID: "call-3", ToolID: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}, RecoveryPolicy: btPolicy(ModeIdempotent, 5), Phase: RequestedPhase()},
	}
	open, err := NewToolBatch("run-7", 3, calls)
	if err != nil {
		t.Fatal(err)
	}
	corr := CorrelationID(ReasonPermission, "run-7", 3, "call-2")
	for _, err := range []error{
		open.MarkExecuting("call-1"),
		open.Complete(completed),
		open.SetResultState("call-1", completed.State),
		open.MarkAwaiting("call-2", WaitToolPermission, corr),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	sealed := open.Clone()
	if _, err := sealed.SealOnRunEnd("run cancelled"); err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"phase_requested":     RequestedPhase(),
		"phase_executing":     ExecutingPhase(2),
		"phase_awaiting":      AwaitingPhase(WaitToolPermission, corr),
		"phase_completed":     CompletedPhase(completed),
		"phase_indeterminate": IndeterminatePhase("owner lease expired after the executor was entered"),
		"tool_batch_open":     open,
		"tool_batch_sealed":   sealed,
	}
}

// TestBatchGolden pins the persisted JSON of every ToolCallPhase variant and of a batch,
// open and sealed, and checks that each golden file decodes to a value that encodes to
// the same bytes.
func TestBatchGolden(t *testing.T) {
	for name, v := range goldenBatchFixtures(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", name+".json")
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			if *updateBatchGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-batch to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from the encoding (run with -update-batch if the change is intended)\n got: %s\nwant: %s", path, got, want)
			}
			var back any
			switch v.(type) {
			case ToolCallPhase:
				back = new(ToolCallPhase)
			case *ToolBatch:
				back = new(ToolBatch)
			default:
				t.Fatalf("no decoder for %T", v)
			}
			if err := json.Unmarshal(want, back); err != nil {
				t.Fatalf("golden file does not decode: %v", err)
			}
			again, err := json.MarshalIndent(back, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(again, '\n'), want) {
				t.Fatalf("round trip differs:\n%s", again)
			}
		})
	}
}
