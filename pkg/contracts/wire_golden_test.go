package contracts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/goldentest"
)

// The wire goldens are rewritten instead of compared under -update ([goldentest.Check]):
//
//	go test ./pkg/contracts -run 'Golden' -update

var wireTime = time.Date(2026, 6, 9, 12, 0, 0, 0, time.UTC)

func wireOutput() ToolOutput {
	return BlocksOutput("call_1", []ContentBlock{
		{Type: BlockText, Text: "a 1x1 chart"},
		{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: "image/png", Data: tinyPNG}},
	}, false).WithState(wireCommand())
}

func wireCommand() Command {
	return Command{Key: "notes.last", Scope: ScopeThread, Merge: MergeDisjoint, RunID: "run-7",
		Action: Action{Kind: ActionSet, Value: json.RawMessage(`{"text":"hi"}`)}}
}

type wireCase struct {
	name  string
	value any
	fresh func() any
	// keys are the exact object keys at each dotted path ("" is the top level), checked
	// against the protocol.
	keys map[string][]string
	// strict re-decodes the golden file with the ingress decoder of the type, if any.
	strict func([]byte) (any, error)
}

func wireCases(t *testing.T) []wireCase {
	descriptor, err := DescriptorOf[sampleToolArgs]()
	if err != nil {
		t.Fatal(err)
	}
	due := wireTime.Add(time.Minute)
	deadline := wireTime.Add(time.Hour)
	out := wireOutput()
	outputKeys := []string{"call_id", "content", "is_error", "state"}
	return []wireCase{
		{
			name: "batch_submission",
			value: &BatchSubmission{
				RunID: "run-7", ThreadID: "thread-1", Step: 3,
				Agent:     AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo", "wc", "delegate"}},
				Narrowing: NarrowingConfigured,
				Policy: &PolicyConfig{DefaultBehavior: BehaviorAsk, Mode: ModeDefault, Rules: []PolicyRule{
					{Pattern: "echo", Behavior: BehaviorAllow},
					{Pattern: "mcp__github__*", Behavior: BehaviorSchedule, Delay: Duration(2 * time.Second)},
					{Pattern: "Bash(rm *)", Behavior: BehaviorAsk, Timeout: Duration(time.Hour)},
				}},
				Assistant: []ContentBlock{{Type: BlockToolUse, ID: "call_1", Name: "echo", Input: json.RawMessage(`{"text":"hi"}`)}},
				Calls:     []ToolCall{{CallID: "call_1", ToolID: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}},
			},
			fresh: func() any { return new(BatchSubmission) },
			keys: map[string][]string{
				"":               {"run_id", "thread_id", "step", "agent", "narrowing", "policy", "assistant", "calls"},
				"agent":          {"snapshot_id", "tools"},
				"calls.0":        {"call_id", "tool_id", "arguments"},
				"policy":         {"default_behavior", "mode", "rules"},
				"policy.rules.1": {"pattern", "behavior", "delay"},
				"policy.rules.2": {"pattern", "behavior", "timeout"},
				"assistant.0":    {"type", "id", "name", "input"},
			},
			strict: func(b []byte) (any, error) { return DecodeSubmission(b) },
		},
		{
			name:  "batch_rejected",
			value: &BatchRejected{BatchID: "tool-batch:run-7:3", RunID: "run-7", Code: string(RejectDuplicateCall), Message: "calls[0] and calls[1] share call_id \"call_1\"", EventID: "evt-1"},
			fresh: func() any { return new(BatchRejected) },
			keys:  map[string][]string{"": {"batch_id", "run_id", "code", "message", "event_id"}},
		},
		{
			name:  "tool_result_event",
			value: &ToolResultEvent{BatchID: "tool-batch:run-7:3", RunID: "run-7", Index: 0, CallID: "call_1", ToolID: "echo", Outcome: OutcomeCompleted, Output: out},
			fresh: func() any { return new(ToolResultEvent) },
			keys: map[string][]string{
				"":       {"batch_id", "run_id", "index", "call_id", "tool_id", "outcome", "output"},
				"output": outputKeys,
			},
		},
		{
			name: "tool_result_event_resource_link",
			value: &ToolResultEvent{BatchID: "tool-batch:run-7:3", RunID: "run-7", Index: 2, CallID: "call_3", ToolID: "report", Outcome: OutcomeCompleted,
				Output: BlocksOutput("call_3", []ContentBlock{ResourceLink(ObjectName("tool-batch:run-7:3:call_3", "9f86d081884c7d65"), MimeTypeText, 1048576)}, false)},
			fresh: func() any { return new(ToolResultEvent) },
			keys: map[string][]string{
				"":                 {"batch_id", "run_id", "index", "call_id", "tool_id", "outcome", "output"},
				"output":           {"call_id", "content", "is_error"},
				"output.content.0": {"type", "name", "uri", "mimeType", "size"},
			},
		},
		{
			name: "tool_progress",
			value: &ToolProgress{BatchID: "tool-batch:run-7:3", RunID: "run-7", Step: 3, Index: 0, CallID: "call_1", ToolID: "report",
				Attempt: 1, Seq: 7, Progress: 7, Total: 20, Message: "page 7 of 20"},
			fresh: func() any { return new(ToolProgress) },
			keys: map[string][]string{
				"": {"batch_id", "run_id", "step", "index", "call_id", "tool_id", "attempt", "seq", "progress", "total", "message"},
			},
		},
		{
			name: "tool_result_event_indeterminate",
			value: &ToolResultEvent{BatchID: "tool-batch:run-7:3", RunID: "run-7", Index: 1, CallID: "call_2", ToolID: "wc", Outcome: OutcomeIndeterminate,
				Output: ErrorOutput("call_2", "tool outcome is indeterminate: owner lease expired after the executor was entered")},
			fresh: func() any { return new(ToolResultEvent) },
			keys: map[string][]string{
				"":       {"batch_id", "run_id", "index", "call_id", "tool_id", "outcome", "output"},
				"output": {"call_id", "content", "is_error"},
			},
		},
		{
			name: "batch_finalized",
			value: &BatchFinalized{BatchID: "tool-batch:run-7:3", RunID: "run-7", ThreadID: "thread-1", Step: 3,
				CallIDs: []string{"call_1", "call_2"}, State: []Command{wireCommand()}},
			fresh: func() any { return new(BatchFinalized) },
			keys:  map[string][]string{"": {"batch_id", "run_id", "thread_id", "step", "call_ids", "state"}},
		},
		{
			name: "batch_results",
			value: &BatchResults{BatchID: "tool-batch:run-7:3", RunID: "run-7",
				Results: []ToolResultEvent{{BatchID: "tool-batch:run-7:3", RunID: "run-7", Index: 0, CallID: "call_1", ToolID: "echo",
					Outcome: OutcomeCompleted, Output: TextOutput("call_1", "hi")}},
				Finalized: BatchFinalized{BatchID: "tool-batch:run-7:3", RunID: "run-7", ThreadID: "thread-1", Step: 3,
					CallIDs: []string{"call_1"}, State: []Command{}}},
			fresh: func() any { return new(BatchResults) },
			keys: map[string][]string{
				"":          {"batch_id", "run_id", "results", "finalized"},
				"finalized": {"batch_id", "run_id", "thread_id", "step", "call_ids", "state"},
			},
		},
		{
			name: "resume_ticket",
			value: &ResumeTicket{CorrelationID: "sched.run-7.3.call_1", RunID: "run-7", ThreadID: "thread-1", SnapshotID: "snap-1",
				BatchID: "tool-batch:run-7:3", CallID: "call_1", ToolID: "echo", Arguments: json.RawMessage(`{"text":"hi"}`),
				Reason: ReasonScheduledAction, DueAt: &due, Deadline: &deadline, OpenedAt: wireTime},
			fresh: func() any { return new(ResumeTicket) },
			keys: map[string][]string{"": {"correlation_id", "run_id", "thread_id", "snapshot_id", "batch_id", "call_id",
				"tool_id", "arguments", "reason", "due_at", "deadline", "opened_at"}},
		},
		{
			name: "resume_command_allow",
			value: &ResumeCommand{CorrelationID: "perm.run-7.3.call_1", RunID: "run-7", ThreadID: "thread-1", SnapshotID: "snap-1",
				Result: ResumeResult{Permission: &PermissionDecision{Decision: DecisionAllow, Note: "looks fine"}}},
			fresh: func() any { return new(ResumeCommand) },
			keys: map[string][]string{
				"":                  {"correlation_id", "run_id", "thread_id", "snapshot_id", "result"},
				"result":            {"permission"},
				"result.permission": {"decision", "note"},
			},
			strict: func(b []byte) (any, error) { return DecodeResumeCommand(b) },
		},
		{
			name: "resume_command_deny",
			value: &ResumeCommand{CorrelationID: "perm.run-7.3.call_1", RunID: "run-7", ThreadID: "thread-1", SnapshotID: "snap-1",
				Result: ResumeResult{Permission: &PermissionDecision{Decision: DecisionDeny, Reason: "not on a Friday"}}},
			fresh: func() any { return new(ResumeCommand) },
			keys: map[string][]string{
				"":                  {"correlation_id", "run_id", "thread_id", "snapshot_id", "result"},
				"result.permission": {"decision", "reason"},
			},
			strict: func(b []byte) (any, error) { return DecodeResumeCommand(b) },
		},
		{
			name: "resume_command_tool_result",
			value: &ResumeCommand{CorrelationID: "client.run-7.3.call_1", RunID: "run-7", ThreadID: "thread-1", SnapshotID: "snap-1",
				Result: ResumeResult{ToolResult: &out}},
			fresh: func() any { return new(ResumeCommand) },
			keys: map[string][]string{
				"":                   {"correlation_id", "run_id", "thread_id", "snapshot_id", "result"},
				"result":             {"tool_result"},
				"result.tool_result": outputKeys,
			},
			strict: func(b []byte) (any, error) { return DecodeResumeCommand(b) },
		},
		{
			name:  "ticket_resolution",
			value: &TicketResolution{CorrelationID: "perm.run-7.3.call_1", Code: "approved", Message: "approved by a person", RunID: "run-7", CallID: "call_1"},
			fresh: func() any { return new(TicketResolution) },
			keys:  map[string][]string{"": {"correlation_id", "code", "message", "run_id", "call_id"}},
		},
		{
			name:  "ticket_rejected",
			value: &TicketResolution{CorrelationID: "perm.run-7.3.call_1", Code: "not_waiting", Message: "the ticket is already resolved"},
			fresh: func() any { return new(TicketResolution) },
			keys:  map[string][]string{"": {"correlation_id", "code", "message"}},
		},
		{
			name: "agent_event_tool_call",
			value: &AgentEvent{Tier: "fact", BatchID: "tool-batch:run-7:3", Event: AgentFact{Type: EventToolCall, ID: "call_1", Name: "echo",
				Input: json.RawMessage(`{"text":"hi"}`), Disposition: DispositionPendingBuiltin}},
			fresh: func() any { return new(AgentEvent) },
			keys:  map[string][]string{"": {"tier", "batch_id", "event"}, "event": {"type", "id", "name", "input", "disposition"}},
		},
		{
			name:  "agent_event_tool_result",
			value: &AgentEvent{Tier: "fact", BatchID: "tool-batch:run-7:3", Event: AgentFact{Type: EventToolResult, ID: "call_1", IsError: ptr(false)}},
			fresh: func() any { return new(AgentEvent) },
			keys:  map[string][]string{"": {"tier", "batch_id", "event"}, "event": {"type", "id", "is_error"}},
		},
		{
			name:  "agent_event_awaiting",
			value: &AgentEvent{Tier: "fact", BatchID: "tool-batch:run-7:3", Event: AgentFact{Type: EventAwaiting, PendingToolUseID: "call_1"}},
			fresh: func() any { return new(AgentEvent) },
			keys:  map[string][]string{"": {"tier", "batch_id", "event"}, "event": {"type", "pending_tool_use_id"}},
		},
		{
			name:  "audit_record",
			value: &AuditRecord{RunID: "run-7", BatchID: "tool-batch:run-7:3", ToolID: "rm", CallID: "call_2", Decision: AuditDecisionDeny, Reason: "tool rm denied by policy", At: wireTime},
			fresh: func() any { return new(AuditRecord) },
			keys:  map[string][]string{"": {"run_id", "batch_id", "tool_id", "call_id", "decision", "reason", "at"}},
		},
		{
			name:  "run_cancel",
			value: &RunCancel{RunID: "run-7", Reason: "user pressed stop"},
			fresh: func() any { return new(RunCancel) },
			keys:  map[string][]string{"": {"run_id", "reason"}},
			strict: func(b []byte) (any, error) {
				return DecodeRunCancel(b)
			},
		},
		{
			name:  "tool_output",
			value: &out,
			fresh: func() any { return new(ToolOutput) },
			keys: map[string][]string{
				"":                 outputKeys,
				"content.0":        {"type", "text"},
				"content.1":        {"type", "source"},
				"content.1.source": {"type", "media_type", "data"},
			},
		},
		{
			name: "tool_output_nested",
			value: &ToolOutput{CallID: "call_3", IsError: true, Content: []ContentBlock{
				{Type: BlockToolResult, ToolUseID: "sub_1", Content: []ContentBlock{{Type: BlockText, Text: "inner"}}},
				{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "https://example.com/a.png"}},
			}},
			fresh: func() any { return new(ToolOutput) },
			keys: map[string][]string{
				"":                 {"call_id", "content", "is_error"},
				"content.0":        {"type", "tool_use_id", "content"},
				"content.1.source": {"type", "url"},
			},
		},
		{
			name:  "command",
			value: ptr(wireCommand()),
			fresh: func() any { return new(Command) },
			keys:  map[string][]string{"": {"key", "scope", "merge", "run_id", "action"}, "action": {"kind", "value"}},
		},
		{
			name:  "command_remove",
			value: &Command{Key: "notes.last", Scope: ScopeRun, Merge: MergeExclusive, Action: Action{Kind: ActionRemove}},
			fresh: func() any { return new(Command) },
			keys:  map[string][]string{"": {"key", "scope", "merge", "action"}, "action": {"kind"}},
		},
		{
			name:  "recovery_policy",
			value: &ToolRecoveryPolicy{Mode: ModeReplaySafe, MaxAttempts: 5},
			fresh: func() any { return new(ToolRecoveryPolicy) },
			keys:  map[string][]string{"": {"mode", "max_attempts"}},
		},
		{
			name:  "gate_outcome_allow",
			value: &GateOutcome{Kind: GateAllow},
			fresh: func() any { return new(GateOutcome) },
			keys:  map[string][]string{"": {"kind"}},
		},
		{
			name:  "gate_outcome_block",
			value: &GateOutcome{Kind: GateBlock, Reason: DenyAllReason},
			fresh: func() any { return new(GateOutcome) },
			keys:  map[string][]string{"": {"kind", "reason"}},
		},
		{
			name:  "gate_outcome_set_result",
			value: &GateOutcome{Kind: GateSetResult, Output: ptr(TextOutput("call_1", "cached answer"))},
			fresh: func() any { return new(GateOutcome) },
			keys:  map[string][]string{"": {"kind", "output"}, "output": {"call_id", "content", "is_error"}},
		},
		{
			name:  "gate_outcome_require_confirmation",
			value: &GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "perm.run-7.3.call_1", Timeout: Duration(15 * time.Minute)},
			fresh: func() any { return new(GateOutcome) },
			keys:  map[string][]string{"": {"kind", "correlation_id", "timeout"}},
		},
		{
			name:  "gate_outcome_schedule",
			value: &GateOutcome{Kind: GateSchedule, CorrelationID: "sched.run-7.3.call_1", ActionKind: "send_email", Delay: Duration(90 * time.Second)},
			fresh: func() any { return new(GateOutcome) },
			keys:  map[string][]string{"": {"kind", "correlation_id", "action_kind", "delay"}},
		},
		{
			name:  "tool_descriptor",
			value: &descriptor,
			fresh: func() any { return new(ToolDescriptor) },
			keys: map[string][]string{
				"":                {"id", "description", "parameters", "kind", "recovery_policy"},
				"recovery_policy": {"mode", "max_attempts"},
			},
		},
	}
}

func TestWireGolden(t *testing.T) {
	for _, tc := range wireCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.MarshalIndent(tc.value, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, '\n')
			goldentest.Check(t, filepath.Join("testdata", "golden", "wire_"+tc.name+".json"), data)

			golden, err := os.ReadFile(filepath.Join("testdata", "golden", "wire_"+tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			// The golden file decodes back to the same value.
			back := tc.fresh()
			dec := json.NewDecoder(bytes.NewReader(golden))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back); err != nil {
				t.Fatalf("decode golden: %v", err)
			}
			want, _ := json.Marshal(tc.value)
			got, err := json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("golden does not decode to the fixed value\n got %s\nwant %s", got, want)
			}
			// Field names are exactly those of the protocol.
			var doc any
			if err := json.Unmarshal(golden, &doc); err != nil {
				t.Fatal(err)
			}
			for path, keys := range tc.keys {
				obj, ok := jsonAt(doc, path).(map[string]any)
				if !ok {
					t.Fatalf("path %q is not an object in the golden file", path)
				}
				var have []string
				for k := range obj {
					have = append(have, k)
				}
				slices.Sort(have)
				wantKeys := slices.Sorted(slices.Values(keys))
				if !slices.Equal(have, wantKeys) {
					t.Fatalf("keys at %q = %v, want %v", path, have, wantKeys)
				}
			}
			// Ingress decoders accept what the system itself writes.
			if tc.strict != nil {
				if _, err := tc.strict(golden); err != nil {
					t.Fatalf("strict decoder rejects the golden file: %v", err)
				}
			}
		})
	}
}

// jsonAt follows a dotted path of object keys and array indexes.
func jsonAt(doc any, path string) any {
	if path == "" {
		return doc
	}
	for _, part := range strings.Split(path, ".") {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			doc = v[i]
		default:
			return nil
		}
	}
	return doc
}
