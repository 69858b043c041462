//go:build unix

package mcpbridge_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// annotationRun is one pipeline with the annotated test MCP server, trusted or not.
type annotationRun struct {
	testStack
	log callLog
}

// startAnnotated runs the pipeline and the api against the test MCP server with its
// annotated tools (lookup: read-only, wipe: destructive, upsert: idempotent in a closed
// world; add: no annotations) under a host policy that denies by default and allows add
// and upsert by rule. The in-tool fault crashes the first run of every upsert call, so
// its recovery shows whether it was pinned replay-safe.
func startAnnotated(t *testing.T, trust bool) annotationRun {
	log := newCallLog(t)
	_, stack := startPipeline(t, app.Options{Services: withAPI(),
		Faults: crashOnceInTool(func(op string) bool { return strings.HasSuffix(op, ":upsert") })}, `
consumers: {ack_wait: 1s}
policy:
  default_behavior: deny
  rules:
    - {pattern: mcp__test__add, behavior: allow}
    - {pattern: mcp__test__upsert, behavior: allow}
executors:
  mcp:
    - {name: test, command: %q, args: ["-annotated", "-log", %q], trust_annotations: %t}
`, serverBin, string(log), trust)
	return annotationRun{testStack: stack, log: log}
}

// runs counts the calls of tool the MCP server logged.
func (r annotationRun) runs(t *testing.T, tool string) int {
	n := 0
	for _, line := range r.log.lines(t) {
		if strings.HasPrefix(line, tool+" ") {
			n++
		}
	}
	return n
}

func annotatedBatch(run string) contracts.BatchSubmission {
	ids := []string{"mcp__test__lookup", "mcp__test__add", "mcp__test__upsert", "mcp__test__wipe"}
	sub := contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: ids}}
	for _, id := range ids {
		args := "{}"
		if id == "mcp__test__add" {
			args = `{"a":1,"b":2}`
		}
		callID := strings.TrimPrefix(id, "mcp__test__")
		sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: callID, ToolID: id, Arguments: []byte(args)})
	}
	return sub
}

// TestAnnotationsTrusted: with trust_annotations, where no host rule matches, the
// read-only lookup is allowed (the host default denies) and the destructive wipe asks
// (a ticket opens); add, which declares nothing (destructive by the specification's
// default), still runs because a host rule allows it; upsert (idempotent, closed world)
// is pinned replay_safe, so after a crash inside it, it is run again and completes.
func TestAnnotationsTrusted(t *testing.T) {
	r := startAnnotated(t, true)
	r.waitCapability(t, "mcp__test__upsert", contracts.CapabilityReplaySafe)
	ctx := callCtx(t)
	// The catalog shows the annotations the decisions come from.
	tools, err := r.client.Tools(ctx, "mcp__test__lookup")
	if err != nil || len(tools) != 1 || tools[0].Annotations == nil || !tools[0].Annotations.ReadOnly() {
		t.Errorf("catalog entry of lookup: %+v %v", tools, err)
	}
	tk := stacktest.Park(t, ctx, r.client, annotatedBatch("run-trusted"), "wipe")
	if _, err := r.client.Deny(ctx, tk, "not today"); err != nil {
		t.Fatal(err)
	}
	res, err := r.client.Await(ctx, "run-trusted", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := resultTexts(res)
	want := []string{"lookup", "3", "upsert", "blocked: not today"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("results %q, want %q", got, want)
	}
	b, err := r.Env.Batch(ctx, "run-trusted", 1) // the run record or the archive
	if err != nil {
		t.Fatal(err)
	}
	if m := b.Pinned[2].Policy.Mode; m != contracts.ModeReplaySafe {
		t.Errorf("upsert pinned %q, want replay_safe", m)
	}
	if m := b.Pinned[0].Policy.Mode; m != contracts.ModeNeverReplay {
		t.Errorf("lookup (not idempotent) pinned %q, want never_replay", m)
	}
	if n := r.runs(t, "upsert"); n != 2 {
		t.Errorf("upsert ran %d times, want 2 (crash, replay)", n)
	}
}

// TestAnnotationsUntrusted: without trust_annotations the same server's annotations steer
// nothing: the host default denies lookup and wipe, and upsert, pinned never_replay, is
// not run again after the crash inside it.
func TestAnnotationsUntrusted(t *testing.T) {
	r := startAnnotated(t, false)
	r.waitCapability(t, "mcp__test__upsert", contracts.CapabilityNonRecoverable)
	ctx := callCtx(t)
	res, err := r.client.SubmitAndWait(ctx, annotatedBatch("run-untrusted"))
	if err != nil {
		t.Fatal(err)
	}
	got := resultTexts(res)
	if got[0] != "blocked: tool mcp__test__lookup denied by policy" || got[1] != "3" ||
		!strings.HasPrefix(got[2], "tool outcome is indeterminate") || got[3] != "blocked: tool mcp__test__wipe denied by policy" {
		t.Errorf("results %q", got)
	}
	if n := r.runs(t, "upsert"); n != 1 {
		t.Errorf("upsert ran %d times, want 1 (never replayed)", n)
	}
}

func resultTexts(res *client.BatchResult) []string {
	out := make([]string, len(res.Results))
	for i, r := range res.Results {
		out[i] = r.Output.Text()
	}
	return out
}

// TestAnnotationsParallelReadOnly: with trust_annotations and parallel_read_only, a batch
// of the read-only lookup's calls is recorded declared parallel (gated all first, then run
// at once) and completes; a batch that adds add, which declares nothing, stays sequential.
func TestAnnotationsParallelReadOnly(t *testing.T) {
	log := newCallLog(t)
	_, r := startPipeline(t, app.Options{Services: withAPI()}, `
policy:
  default_behavior: deny
  rules:
    - {pattern: mcp__test__add, behavior: allow}
executors:
  mcp:
    - {name: test, command: %q, args: ["-annotated", "-log", %q], trust_annotations: true, parallel_read_only: true}
`, serverBin, string(log))
	r.waitCapability(t, "mcp__test__lookup", contracts.CapabilityNonRecoverable)
	ctx := callCtx(t)
	for _, tc := range []struct {
		run      string
		tools    []string
		declared bool
		want     string
	}{
		{"run-read-only", []string{"mcp__test__lookup", "mcp__test__lookup"}, true, "lookup|lookup"},
		{"run-read-and-add", []string{"mcp__test__lookup", "mcp__test__add"}, false, "lookup|3"},
	} {
		sub := contracts.BatchSubmission{RunID: tc.run, ThreadID: "t-" + tc.run, Step: 1,
			Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: tc.tools}}
		for i, id := range tc.tools {
			args := "{}"
			if id == "mcp__test__add" {
				args = `{"a":1,"b":2}`
			}
			sub.Calls = append(sub.Calls, contracts.ToolCall{CallID: fmt.Sprintf("c%d", i), ToolID: id, Arguments: []byte(args)})
		}
		res, err := r.client.SubmitAndWait(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(resultTexts(res), "|"); got != tc.want {
			t.Errorf("%s: results %q, want %q", tc.run, got, tc.want)
		}
		b, err := r.Env.Batch(ctx, tc.run, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b.ParallelDeclared != tc.declared {
			t.Errorf("%s: declared parallel %v, want %v", tc.run, b.ParallelDeclared, tc.declared)
		}
	}
}
