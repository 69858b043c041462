package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

const validSubmission = `{
  "run_id": "run-7", "thread_id": "thread-1", "step": 3,
  "agent": { "snapshot_id": "snap-1", "tools": ["echo", "wc", "delegate"] },
  "narrowing": "configured",
  "policy": { "default_behavior": "ask", "rules": [ {"pattern": "echo", "behavior": "allow"} ] },
  "assistant": [ {"type": "tool_use", "id": "call_1", "name": "echo", "input": {"text": "hi"}} ],
  "calls": [ {"call_id": "call_1", "tool_id": "echo", "arguments": {"text": "hi"}} ]
}`

// submissionWith builds a submission document from the valid one with top-level fields
// replaced (raw JSON values) or removed (value "").
func submissionWith(t testing.TB, fields map[string]string) string {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validSubmission), &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		if v == "" {
			delete(doc, k)
			continue
		}
		doc[k] = json.RawMessage(v)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("build submission: %v", err)
	}
	return string(out)
}

func callsJSON(n int, argsFor func(i int) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"call_id":"c%d","tool_id":"echo","arguments":%s}`, i, argsFor(i))
	}
	b.WriteByte(']')
	return b.String()
}

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func TestDecodeSubmissionRejections(t *testing.T) {
	big := `{"text":"` + strings.Repeat("x", MaxSubmissionBytes) + `"}`
	tests := []struct {
		name string
		doc  string
		code RejectCode
		msg  string // substring of the message
	}{
		{"too large", submissionWith(t, map[string]string{"calls": callsJSON(1, func(int) string { return big })}), RejectTooLarge, "more than"},
		{"invalid utf8", strings.Replace(validSubmission, `"hi"}}`, "\"h\xffi\"}}", 1), RejectInvalidUTF8, "UTF-8"},
		{"metadata key with upper case", submissionWith(t, map[string]string{"metadata": `{"Session":"x"}`}), RejectInvalidField, "metadata key"},
		{"metadata value with a control character", submissionWith(t, map[string]string{"metadata": `{"mcp.client_name":"a\u0007b"}`}), RejectInvalidField, "control characters"},
		{"metadata value too long", submissionWith(t, map[string]string{"metadata": `{"k":"` + strings.Repeat("v", MaxMetadataValueBytes+1) + `"}`}), RejectInvalidField, "more than 512"},
		{"too deep in arguments", submissionWith(t, map[string]string{"calls": callsJSON(1, func(int) string { return nested(MaxJSONDepth) })}), RejectTooDeep, "deeper than 64"},
		{"ten thousand deep", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), RejectTooDeep, "deeper"},
		{"ten thousand deep unbalanced", strings.Repeat(`{"a":`, 10000), RejectTooDeep, "deeper"},
		{"truncated", validSubmission[:len(validSubmission)-3], RejectInvalidJSON, "not valid JSON"},
		{"trailing garbage", validSubmission + "x", RejectInvalidJSON, "not valid JSON"},
		{"two documents", validSubmission + validSubmission, RejectInvalidJSON, "not valid JSON"},
		{"array payload", `[]`, RejectInvalidJSON, "not a JSON object"},
		{"null payload", `null`, RejectInvalidJSON, "not a JSON object"},
		{"empty payload", ``, RejectInvalidJSON, "not valid JSON"},
		{"duplicate top-level key", strings.Replace(validSubmission, `"step": 3`, `"step": 3, "step": 4`, 1), RejectInvalidJSON, `repeats the key "step"`},
		{"duplicate key in arguments", strings.Replace(validSubmission, `"arguments": {"text": "hi"}`, `"arguments": {"text": "hi", "text": "rm -rf /"}`, 1), RejectInvalidJSON, `repeats the key "calls[0].arguments.text"`},
		{"duplicate key after a huge number", strings.Replace(validSubmission, `"arguments": {"text": "hi"}`, `"arguments": {"n": 1e400, "text": "hi", "text": "rm -rf /"}`, 1), RejectInvalidJSON, `repeats the key "calls[0].arguments.text"`},
		{"duplicate key wins over an earlier unknown field", `{"zzz":1,"run_id":"a","run_id":"b"}`, RejectInvalidJSON, `repeats the key "run_id"`},
		{"duplicate key deep in assistant", submissionWith(t, map[string]string{"assistant": `[{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"a","text":"b"}]}]`}), RejectInvalidJSON, `"assistant[0].content[0].text"`},
		{"unknown top-level field", submissionWith(t, map[string]string{"priority": `1`}), RejectUnknownField, `"priority"`},
		{"unknown nested content field", submissionWith(t, map[string]string{"assistant": `[{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"a"},{"type":"text","txt":"b"}]}]`}), RejectUnknownField, `"assistant[0].content[1].txt"`},
		{"key in other case", strings.Replace(validSubmission, `"run_id"`, `"RUN_ID"`, 1), RejectUnknownField, `"RUN_ID"`},
		{"unknown agent field", submissionWith(t, map[string]string{"agent": `{"snapshot_id":"s","tools":[],"model":"x"}`}), RejectUnknownField, `"agent.model"`},
		{"unknown call field", submissionWith(t, map[string]string{"calls": `[{"call_id":"c","tool_id":"echo","arguments":{},"target":"brain"}]`}), RejectUnknownField, `"calls[0].target"`},
		{"unknown policy field", submissionWith(t, map[string]string{"policy": `{"rules":[],"strict":true}`}), RejectUnknownField, `"policy.strict"`},
		{"unknown rule field", submissionWith(t, map[string]string{"policy": `{"rules":[{"pattern":"x","behavior":"allow","regex":true}]}`}), RejectUnknownField, `"policy.rules[0].regex"`},
		{"unknown assistant field", submissionWith(t, map[string]string{"assistant": `[{"type":"text","text":"x","cache":1}]`}), RejectUnknownField, `"assistant[0].cache"`},
		{"step as string", submissionWith(t, map[string]string{"step": `"3"`}), RejectInvalidField, "step"},
		{"step fractional", submissionWith(t, map[string]string{"step": `3.5`}), RejectInvalidField, "step"},
		{"calls not an array", submissionWith(t, map[string]string{"calls": `{"call_id":"c"}`}), RejectInvalidField, "calls"},
		{"tools not strings", submissionWith(t, map[string]string{"agent": `{"snapshot_id":"s","tools":[1]}`}), RejectInvalidField, "tools"},
		{"bad delay", submissionWith(t, map[string]string{"policy": `{"rules":[{"pattern":"x","behavior":"schedule","delay":"soon"}]}`}), RejectInvalidField, "duration"},
		{"bad run id", submissionWith(t, map[string]string{"run_id": `"run 7"`}), RejectInvalidID, "run_id"},
		{"run id with dot", submissionWith(t, map[string]string{"run_id": `"run.7"`}), RejectInvalidID, "run_id"},
		{"missing run id", submissionWith(t, map[string]string{"run_id": ""}), RejectInvalidID, "run_id is empty"},
		{"missing thread id", submissionWith(t, map[string]string{"thread_id": ""}), RejectInvalidID, "thread_id"},
		{"bad snapshot id", submissionWith(t, map[string]string{"agent": `{"snapshot_id":"snap:1","tools":[]}`}), RejectInvalidID, "agent.snapshot_id"},
		{"missing agent", submissionWith(t, map[string]string{"agent": ""}), RejectInvalidID, "agent.snapshot_id"},
		{"bad call id", submissionWith(t, map[string]string{"calls": `[{"call_id":"toolu_01\nx","tool_id":"echo"}]`}), RejectInvalidID, "calls[0].call_id"},
		{"long call id", submissionWith(t, map[string]string{"calls": `[{"call_id":"` + strings.Repeat("c", 257) + `","tool_id":"echo"}]`}), RejectInvalidID, "longer than 256"},
		{"negative step", submissionWith(t, map[string]string{"step": `-1`}), RejectInvalidStep, "negative"},
		{"missing step", submissionWith(t, map[string]string{"step": ""}), RejectInvalidStep, "required"},
		{"no calls", submissionWith(t, map[string]string{"calls": `[]`}), RejectEmptyBatch, "no calls"},
		{"missing calls", submissionWith(t, map[string]string{"calls": ""}), RejectEmptyBatch, "no calls"},
		{"null calls", submissionWith(t, map[string]string{"calls": "null"}), RejectEmptyBatch, "no calls"},
		{"too many calls", submissionWith(t, map[string]string{"calls": callsJSON(MaxCallsPerBatch+1, func(int) string { return `{}` })}), RejectTooManyCalls, "513 calls"},
		{"duplicate call", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo"},{"call_id":"b","tool_id":"wc"},{"call_id":"a","tool_id":"wc"}]`}), RejectDuplicateCall, `calls[0] and calls[2] share call_id "a"`},
		{"empty tool id", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":""}]`}), RejectInvalidField, "calls[0].tool_id"},
		{"long tool id", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"` + strings.Repeat("t", 201) + `"}]`}), RejectInvalidField, "calls[0].tool_id"},
		{"control char in tool id", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"ec\u0007ho"}]`}), RejectInvalidField, "calls[0].tool_id"},
		{"bidi override in tool id", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"ec\u202eho"}]`}), RejectInvalidField, "calls[0].tool_id"},
		{"bad visible tool", submissionWith(t, map[string]string{"agent": `{"snapshot_id":"s","tools":["ok","bad\n"]}`}), RejectInvalidField, "agent.tools[1]"},
		{"unknown narrowing", submissionWith(t, map[string]string{"narrowing": `"allow_all"`}), RejectInvalidField, "narrowing"},
		{"narrowing in other case", submissionWith(t, map[string]string{"narrowing": `"DENY_ALL"`}), RejectInvalidField, "narrowing"},
		{"bad assistant block", submissionWith(t, map[string]string{"assistant": `[{"type":"tool_use","id":"call_1"}]`}), RejectInvalidField, "assistant[0]"},
		{"unknown policy behaviour", submissionWith(t, map[string]string{"policy": `{"default_behavior":"maybe"}`}), RejectInvalidField, "default_behavior"},
		{"unknown policy mode", submissionWith(t, map[string]string{"policy": `{"mode":"yolo"}`}), RejectInvalidField, "mode"},
		{"empty rule pattern", submissionWith(t, map[string]string{"policy": `{"rules":[{"pattern":" ","behavior":"allow"}]}`}), RejectInvalidField, "empty pattern"},
		{"negative rule delay", submissionWith(t, map[string]string{"policy": `{"rules":[{"pattern":"x","behavior":"schedule","delay":-5}]}`}), RejectInvalidField, "negative"},
	}
	seen := map[RejectCode]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := DecodeSubmission([]byte(tt.doc))
			if s != nil {
				t.Fatalf("decoded a submission that must be rejected: %+v", s)
			}
			var rej *Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("error %v (%T) is not a *Rejection", err, err)
			}
			if rej.Code != tt.code {
				t.Fatalf("code %s (%s), want %s", rej.Code, rej.Message, tt.code)
			}
			if !strings.Contains(rej.Message, tt.msg) {
				t.Fatalf("message %q does not contain %q", rej.Message, tt.msg)
			}
		})
		seen[tt.code] = true
	}
	for _, code := range []RejectCode{RejectTooLarge, RejectInvalidUTF8, RejectTooDeep, RejectInvalidJSON, RejectUnknownField,
		RejectInvalidField, RejectInvalidID, RejectInvalidStep, RejectEmptyBatch, RejectTooManyCalls, RejectDuplicateCall} {
		if !seen[code] {
			t.Errorf("no row for rejection code %s", code)
		}
	}
}

func TestDecodeSubmissionAccepts(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, s *BatchSubmission)
	}{
		{"design example", validSubmission, func(t *testing.T, s *BatchSubmission) {
			if s.RunID != "run-7" || s.Step != 3 || s.BatchID() != "tool-batch:run-7:3" || len(s.Calls) != 1 ||
				s.Calls[0].ToolID != "echo" || s.Policy == nil || len(s.Policy.Rules) != 1 || len(s.Assistant) != 1 {
				t.Fatalf("decoded %+v", s)
			}
		}},
		{"null arguments become {}", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo","arguments":null}]`}), func(t *testing.T, s *BatchSubmission) {
			if string(s.Calls[0].Arguments) != `{}` {
				t.Fatalf("arguments %s", s.Calls[0].Arguments)
			}
		}},
		{"missing arguments become {}", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo"}]`}), func(t *testing.T, s *BatchSubmission) {
			if string(s.Calls[0].Arguments) != `{}` {
				t.Fatalf("arguments %s", s.Calls[0].Arguments)
			}
		}},
		{"non-object arguments are the tool's problem", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo","arguments":"hi"}]`}), func(t *testing.T, s *BatchSubmission) {
			if string(s.Calls[0].Arguments) != `"hi"` {
				t.Fatalf("arguments %s", s.Calls[0].Arguments)
			}
		}},
		{"unknown fields inside arguments are free-form", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo","arguments":{"anything":{"goes":[1]}}}]`}), nil},
		{"missing narrowing is configured", submissionWith(t, map[string]string{"narrowing": ""}), func(t *testing.T, s *BatchSubmission) {
			if s.Narrowing != NarrowingConfigured {
				t.Fatalf("narrowing %q", s.Narrowing)
			}
		}},
		{"deny all", submissionWith(t, map[string]string{"narrowing": `"deny_all"`}), func(t *testing.T, s *BatchSubmission) {
			if s.Narrowing != NarrowingDenyAll {
				t.Fatalf("narrowing %q", s.Narrowing)
			}
		}},
		{"mcp tool ids", submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"mcp__github__create_issue"},{"call_id":"b","tool_id":"fs.read"}]`}), nil},
		{"missing tools is empty", submissionWith(t, map[string]string{"agent": `{"snapshot_id":"s"}`}), func(t *testing.T, s *BatchSubmission) {
			if s.Agent.Tools == nil || len(s.Agent.Tools) != 0 {
				t.Fatalf("tools %#v", s.Agent.Tools)
			}
		}},
		{"step zero", submissionWith(t, map[string]string{"step": `0`}), nil},
		{"no policy", submissionWith(t, map[string]string{"policy": ""}), func(t *testing.T, s *BatchSubmission) {
			if s.Policy != nil {
				t.Fatal("policy invented")
			}
		}},
		{"exactly max calls", submissionWith(t, map[string]string{"calls": callsJSON(MaxCallsPerBatch, func(int) string { return `null` })}), func(t *testing.T, s *BatchSubmission) {
			if len(s.Calls) != MaxCallsPerBatch {
				t.Fatalf("%d calls", len(s.Calls))
			}
		}},
		{"exactly max depth", submissionWith(t, map[string]string{"calls": callsJSON(1, func(int) string { return nested(MaxJSONDepth - 3) })}), nil},
		{"brackets inside strings do not count", submissionWith(t, map[string]string{"calls": callsJSON(1, func(int) string {
			return `{"s":"` + strings.Repeat(`[{\"`, 200) + `"}`
		})}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := DecodeSubmission([]byte(tt.doc))
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestDeepInputIsRejectedBeforeParsing(t *testing.T) {
	doc := []byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := DecodeSubmission(doc); err == nil {
			t.Fatal("accepted")
		}
	})
	// A parser would allocate per level; the byte scan allocates only the rejection.
	if allocs > 10 {
		t.Fatalf("%v allocations for a 10,000-deep document: it was parsed, not scanned", allocs)
	}
}

func TestJSONNestingDepth(t *testing.T) {
	tests := []struct {
		doc  string
		want int
	}{
		{`{}`, 1},
		{`1`, 0},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`{"a":"[[[[{{{{"}`, 1},
		{`{"a":"\"[[["}`, 1},
		{`{"a":"\\","b":[[]]}`, 3},
		{`[[],[[]],[]]`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			if got := jsonNestingDepth([]byte(tt.doc), 100); got != tt.want {
				t.Fatalf("depth %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSubmissionHash(t *testing.T) {
	decode := func(doc string) *BatchSubmission {
		t.Helper()
		s, err := DecodeSubmission([]byte(doc))
		if err != nil {
			t.Fatalf("decode %s: %v", doc, err)
		}
		return s
	}
	base := decode(validSubmission)
	h := base.Hash()
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Fatalf("hash %q is not lower-case SHA-256 hex", h)
	}
	compact, _ := json.Marshal(base)
	same := []struct {
		name string
		doc  string
	}{
		{"re-encoded", string(compact)},
		{"other whitespace", strings.Join(strings.Fields(validSubmission), " ")},
		{"other key order", `{"calls":[{"arguments":{"text":"hi"},"tool_id":"echo","call_id":"call_1"}],"assistant":[{"input":{"text":"hi"},"name":"echo","id":"call_1","type":"tool_use"}],
			"policy":{"rules":[{"behavior":"allow","pattern":"echo"}],"default_behavior":"ask"},"narrowing":"configured","agent":{"tools":["echo","wc","delegate"],"snapshot_id":"snap-1"},"step":3,"thread_id":"thread-1","run_id":"run-7"}`},
		{"narrowing omitted", submissionWith(t, map[string]string{"narrowing": ""})},
		{"escaped string", strings.Replace(validSubmission, `"hi"}}`, `"\u0068i"}}`, 1)},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			if got := decode(tt.doc).Hash(); got != h {
				t.Fatalf("hash differs for the same content")
			}
		})
	}
	nullArgs := decode(submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo","arguments":null}]`}))
	emptyArgs := decode(submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo","arguments":{}}]`}))
	if nullArgs.Hash() != emptyArgs.Hash() {
		t.Fatal("null and {} arguments hash differently after normalisation")
	}
	different := []struct {
		name string
		doc  string
	}{
		{"argument value", strings.Replace(validSubmission, `"arguments": {"text": "hi"}`, `"arguments": {"text": "ho"}`, 1)},
		{"number literal", strings.Replace(validSubmission, `"arguments": {"text": "hi"}`, `"arguments": {"text": "hi", "n": 1.0}`, 1)},
		{"step", submissionWith(t, map[string]string{"step": `4`})},
		{"tool id", strings.Replace(validSubmission, `"tool_id": "echo"`, `"tool_id": "wc"`, 1)},
		{"visible tools", submissionWith(t, map[string]string{"agent": `{"snapshot_id":"snap-1","tools":["echo"]}`})},
		{"narrowing", submissionWith(t, map[string]string{"narrowing": `"deny_all"`})},
		{"policy", submissionWith(t, map[string]string{"policy": ""})},
		{"assistant", submissionWith(t, map[string]string{"assistant": ""})},
		{"call order", submissionWith(t, map[string]string{"calls": `[{"call_id":"b","tool_id":"echo"},{"call_id":"a","tool_id":"echo"}]`})},
	}
	order := decode(submissionWith(t, map[string]string{"calls": `[{"call_id":"a","tool_id":"echo"},{"call_id":"b","tool_id":"echo"}]`}))
	for _, tt := range different {
		t.Run("different/"+tt.name, func(t *testing.T) {
			got := decode(tt.doc).Hash()
			if got == h || (tt.name == "call order" && got == order.Hash()) {
				t.Fatal("different content hashes the same")
			}
		})
	}
	handBuilt := &BatchSubmission{RunID: "r", Calls: []ToolCall{{CallID: "a", ToolID: "t", Arguments: json.RawMessage(`{`)}}}
	other := &BatchSubmission{RunID: "r", Calls: []ToolCall{{CallID: "a", ToolID: "t", Arguments: json.RawMessage(`}`)}}}
	if handBuilt.Hash() == other.Hash() || handBuilt.Hash() != handBuilt.Hash() {
		t.Fatal("hand-built submissions with invalid raw JSON must hash deterministically and distinctly")
	}
}

func TestDecodeResumeCommand(t *testing.T) {
	const allow = `{"correlation_id":"perm.run-7.3.call_1","run_id":"run-7","thread_id":"thread-1","snapshot_id":"snap-1","result":{"permission":{"decision":"allow","note":"ok"}}}`
	tests := []struct {
		name string
		doc  string
		code RejectCode // "" means accepted
	}{
		{"allow", allow, ""},
		{"deny", strings.Replace(allow, `"decision":"allow","note":"ok"`, `"decision":"deny","reason":"no"`, 1), ""},
		{"policy-style correlation id", strings.Replace(allow, `perm.run-7.3.call_1`, `perm-call_1`, 1), ""},
		{"tool result", `{"correlation_id":"client.run-7.3.call_1","run_id":"run-7","thread_id":"thread-1","snapshot_id":"snap-1",
			"result":{"tool_result":{"call_id":"call_1","content":[{"type":"text","text":"42"}],"is_error":false}}}`, ""},
		{"tool result without content", `{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"tool_result":{"call_id":"call_1"}}}`, ""},
		{"too large", `{"correlation_id":"` + strings.Repeat("x", MaxSubmissionBytes) + `"}`, RejectTooLarge},
		{"invalid utf8", strings.Replace(allow, "ok", "o\xffk", 1), RejectInvalidUTF8},
		{"too deep", `{"correlation_id":"c","result":{"tool_result":{"call_id":"c","content":[],"state":[{"key":"k","scope":"run","merge":"disjoint","action":{"kind":"set","value":` + nested(70) + `}}]}}}`, RejectTooDeep},
		{"invalid json", allow[:20], RejectInvalidJSON},
		{"duplicate key", strings.Replace(allow, `"run_id":"run-7"`, `"run_id":"run-7","run_id":"run-8"`, 1), RejectInvalidJSON},
		{"unknown top-level field", strings.Replace(allow, `"run_id"`, `"now_ms":1,"run_id"`, 1), RejectUnknownField},
		{"unknown result field", strings.Replace(allow, `"permission"`, `"input":"x","permission"`, 1), RejectUnknownField},
		{"unknown decision field", strings.Replace(allow, `"note":"ok"`, `"note":"ok","scope":"always"`, 1), RejectUnknownField},
		{"unknown output field", `{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"tool_result":{"call_id":"c","extra":1}}}`, RejectUnknownField},
		{"wrong type", strings.Replace(allow, `"run_id":"run-7"`, `"run_id":7`, 1), RejectInvalidField},
		{"bad correlation id", strings.Replace(allow, `perm.run-7.3.call_1`, `perm..x`, 1), RejectInvalidID},
		{"correlation id with wildcard", strings.Replace(allow, `perm.run-7.3.call_1`, `perm.*`, 1), RejectInvalidID},
		{"empty correlation id", strings.Replace(allow, `perm.run-7.3.call_1`, ``, 1), RejectInvalidID},
		{"bad run id", strings.Replace(allow, `"run_id":"run-7"`, `"run_id":"run 7"`, 1), RejectInvalidID},
		{"bad thread id", strings.Replace(allow, `"thread_id":"thread-1"`, `"thread_id":""`, 1), RejectInvalidID},
		{"bad snapshot id", strings.Replace(allow, `"snapshot_id":"snap-1"`, `"snapshot_id":"a/b"`, 1), RejectInvalidID},
		{"bad tool result call id", `{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"tool_result":{"call_id":"a\u0007b"}}}`, RejectInvalidID},
		{"bad tool result block", `{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"tool_result":{"call_id":"c","content":[{"type":"image"}]}}}`, RejectInvalidField},
		{"both results", `{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"permission":{"decision":"allow"},"tool_result":{"call_id":"c"}}}`, RejectInvalidField},
		{"no result", `{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{}}`, RejectInvalidField},
		{"unknown decision", strings.Replace(allow, `"decision":"allow"`, `"decision":"approve"`, 1), RejectInvalidField},
		{"allow with reason", strings.Replace(allow, `"note":"ok"`, `"reason":"ok"`, 1), RejectInvalidField},
		{"deny with note", strings.Replace(allow, `"decision":"allow"`, `"decision":"deny"`, 1), RejectInvalidField},
		{"allow with edited arguments and an actor", strings.Replace(strings.Replace(allow, `"note":"ok"`, `"note":"ok","arguments":{"path":"/tmp/x"}`, 1),
			`"run_id"`, `"actor":"alice","run_id"`, 1), ""},
		{"allow with arguments that are no object", strings.Replace(allow, `"note":"ok"`, `"arguments":[1]`, 1), ""}, // the gate refuses them: invalid_arguments, the ticket stays open
		{"deny with arguments", strings.Replace(allow, `"decision":"allow","note":"ok"`, `"decision":"deny","arguments":{"a":1}`, 1), RejectInvalidField},
		{"actor over the limit", strings.Replace(allow, `"run_id"`, `"actor":"`+strings.Repeat("a", MaxActorLength+1)+`","run_id"`, 1), RejectInvalidField},
		{"actor of the wrong type", strings.Replace(allow, `"run_id"`, `"actor":7,"run_id"`, 1), RejectInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeResumeCommand([]byte(tt.doc))
			if tt.code == "" {
				if err != nil || c == nil {
					t.Fatalf("rejected: %v", err)
				}
				if c.Result.ToolResult != nil && c.Result.ToolResult.Content == nil {
					t.Fatal("tool result content left nil")
				}
				return
			}
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Code != tt.code || c != nil {
				t.Fatalf("got %v, %v; want code %s", c, err, tt.code)
			}
		})
	}
}

func TestDecodeRunCancel(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		code RejectCode
	}{
		{"ok", `{"run_id":"run-7","reason":"stop"}`, ""},
		{"no reason", `{"run_id":"run-7"}`, ""},
		{"bad run id", `{"run_id":"run-7.>"}`, RejectInvalidID},
		{"missing run id", `{"reason":"stop"}`, RejectInvalidID},
		{"unknown field", `{"run_id":"run-7","force":true}`, RejectUnknownField},
		{"wrong type", `{"run_id":["run-7"]}`, RejectInvalidField},
		{"not json", `run-7`, RejectInvalidJSON},
		{"not utf8", "{\"run_id\":\"r\xff\"}", RejectInvalidUTF8},
		{"too deep", `{"run_id":"r","reason":` + nested(65) + `}`, RejectTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeRunCancel([]byte(tt.doc))
			if tt.code == "" {
				if err != nil || c == nil || c.RunID != "run-7" {
					t.Fatalf("got %+v, %v", c, err)
				}
				return
			}
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Code != tt.code {
				t.Fatalf("got %v, want code %s", err, tt.code)
			}
		})
	}
}

func TestRejectionMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("é", 100000)
	tests := []struct {
		name string
		doc  string
		code RejectCode
	}{
		{"huge unknown key", `{"` + huge + `":1}`, RejectUnknownField},
		{"huge narrowing", submissionWith(t, map[string]string{"narrowing": `"` + huge + `"`}), RejectInvalidField},
		{"huge duplicate key", `{"` + huge + `":1,"` + huge + `":2}`, RejectInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeSubmission([]byte(tt.doc))
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Code != tt.code {
				t.Fatalf("got %v, want code %s", err, tt.code)
			}
			if len(rej.Message) > MaxRejectionMessageBytes || !utf8.ValidString(rej.Message) || !strings.HasSuffix(rej.Message, "…") {
				t.Fatalf("message of %d bytes (valid UTF-8: %v) is not cut to %d", len(rej.Message), utf8.ValidString(rej.Message), MaxRejectionMessageBytes)
			}
		})
	}
}

// TestDecodeSubmissionKeepsMetadata: valid metadata is kept as sent and is part of the
// batch's content hash.
func TestDecodeSubmissionKeepsMetadata(t *testing.T) {
	s, err := DecodeSubmission([]byte(submissionWith(t, map[string]string{"metadata": `{"mcp.session_id":"S1","actor":"alice"}`})))
	if err != nil {
		t.Fatal(err)
	}
	if s.Metadata["mcp.session_id"] != "S1" || s.Metadata["actor"] != "alice" {
		t.Fatalf("metadata %v", s.Metadata)
	}
	plain, err := DecodeSubmission([]byte(validSubmission))
	if err != nil {
		t.Fatal(err)
	}
	if s.Hash() == plain.Hash() {
		t.Fatal("metadata does not change the content hash")
	}
}
