package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeSubmission checks that the ingress decoder never panics, that every rejection
// is a *Rejection, and that every accepted submission has valid ids, 1..512 unique calls,
// and survives re-encoding with the same hash. `go test` runs the seed corpus; run
// `go test -fuzz FuzzDecodeSubmission -fuzztime 10s ./pkg/contracts` to explore.
func FuzzDecodeSubmission(f *testing.F) {
	seeds := []string{
		validSubmission,
		`{"run_id":"r","thread_id":"t","step":0,"agent":{"snapshot_id":"s"},"calls":[{"call_id":"c","tool_id":"mcp__x__y","arguments":null}]}`,
		`{"run_id":"r","thread_id":"t","step":1,"agent":{"snapshot_id":"s","tools":[]},"narrowing":"deny_all","calls":[{"call_id":"a","tool_id":"t","arguments":[1,"<&>",{"k":"\u2028"}]},{"call_id":"b","tool_id":"t"}]}`,
		`{"run_id":"r","thread_id":"t","step":2,"agent":{"snapshot_id":"s"},"policy":{"mode":"plan","rules":[{"pattern":"Bash(npm *)","behavior":"schedule","delay":1500}]},"calls":[{"call_id":"c","tool_id":"t"}]}`,
		`{"run_id":"r","thread_id":"t","step":2,"agent":{"snapshot_id":"s"},"assistant":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"u","content":[{"type":"image","source":{"type":"url","url":"https://a/b"}}]}],"calls":[{"call_id":"c","tool_id":"t","arguments":{"n":1e400}}]}`,
		`{"run_id":"r","thread_id":"t","step":-1,"agent":{"snapshot_id":"s"},"calls":[]}`,
		`{"run_id":"r","run_id":"s"}`,
		`{"RUN_ID":"r"}`,
		strings.Repeat("[", 100),
		"{\"run_id\":\"\xff\"}",
		`{"run_id":"r","thread_id":"t","step":3,"agent":{"snapshot_id":"s"},"calls":[{"call_id":"a","tool_id":"t"},{"call_id":"a","tool_id":"t"}]}`,
		`[]`,
		``,
		`null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSubmission(data)
		if err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Code == "" || rej.Message == "" {
				t.Fatalf("error %v (%T) is not a coded *Rejection", err, err)
			}
			if s != nil {
				t.Fatal("a rejection returned a submission")
			}
			return
		}
		for field, id := range map[string]string{"run_id": s.RunID, "thread_id": s.ThreadID, "snapshot_id": s.Agent.SnapshotID} {
			if ValidateID(field, id) != nil {
				t.Fatalf("accepted invalid %s %q", field, id)
			}
		}
		if s.Step < 0 {
			t.Fatalf("accepted negative step %d", s.Step)
		}
		if n := len(s.Calls); n < 1 || n > MaxCallsPerBatch {
			t.Fatalf("accepted %d calls", n)
		}
		seen := map[string]bool{}
		for _, c := range s.Calls {
			if ValidateID("call_id", c.CallID) != nil || seen[c.CallID] {
				t.Fatalf("accepted invalid or duplicate call id %q", c.CallID)
			}
			seen[c.CallID] = true
			if ValidateToolID(c.ToolID) != nil {
				t.Fatalf("accepted invalid tool id %q", c.ToolID)
			}
			if len(c.Arguments) == 0 || bytes.Equal(c.Arguments, []byte("null")) || !json.Valid(c.Arguments) {
				t.Fatalf("arguments not normalised: %q", c.Arguments)
			}
		}
		if s.Narrowing != NarrowingConfigured && s.Narrowing != NarrowingDenyAll {
			t.Fatalf("narrowing not normalised: %q", s.Narrowing)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if buf.Len() > MaxSubmissionBytes {
			return // escaping grew a near-limit document past the limit
		}
		again, err := DecodeSubmission(buf.Bytes())
		if err != nil {
			t.Fatalf("re-encoded submission rejected: %v\n%s", err, buf.Bytes())
		}
		if again.Hash() != s.Hash() {
			t.Fatalf("hash changed across re-encoding\n%s", buf.Bytes())
		}
	})
}

// FuzzDecodeResumeCommand checks that the resume decoder never panics, rejects only with a
// coded *Rejection, and accepts only commands with valid ids and exactly one result.
func FuzzDecodeResumeCommand(f *testing.F) {
	for _, s := range []string{
		`{"correlation_id":"perm.run-7.3.call_1","run_id":"run-7","thread_id":"thread-1","snapshot_id":"snap-1","result":{"permission":{"decision":"allow","note":"ok"}}}`,
		`{"correlation_id":"perm-call_1","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"permission":{"decision":"deny","reason":"no"}}}`,
		`{"correlation_id":"client.r.0.c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{"tool_result":{"call_id":"c","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"aGk="}}],"state":[{"key":"k","scope":"run","merge":"exclusive","action":{"kind":"set","value":{"a":1}}}]}}}`,
		`{"correlation_id":"c","run_id":"r","thread_id":"t","snapshot_id":"s","result":{}}`,
		`{"correlation_id":"..","result":{"permission":{"decision":"allow"},"tool_result":{"call_id":"c"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeResumeCommand(data)
		if err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Code == "" || c != nil {
				t.Fatalf("error %v (%T) is not a coded *Rejection", err, err)
			}
			return
		}
		if validateCorrelationID(c.CorrelationID) != nil || ValidateID("run_id", c.RunID) != nil ||
			ValidateID("thread_id", c.ThreadID) != nil || ValidateID("snapshot_id", c.SnapshotID) != nil {
			t.Fatalf("accepted invalid ids: %+v", c)
		}
		if (c.Result.Permission == nil) == (c.Result.ToolResult == nil) {
			t.Fatalf("accepted a result that is not exactly one kind: %+v", c.Result)
		}
		if out := c.Result.ToolResult; out != nil && out.Validate() != nil {
			t.Fatalf("accepted an invalid tool result: %v", out.Validate())
		}
	})
}
