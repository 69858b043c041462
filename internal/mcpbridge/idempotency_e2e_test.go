//go:build unix

package mcpbridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPipeline_mcpIdempotencyKeyAndSpans runs the pipeline with a real MCP server and an
// in-memory span exporter on a batch of two calls: the MCP tool meta (pinned replay_safe
// by its trusted annotations), whose first run the executor dies inside, and the Go tool
// echo, which asks for approval first.
//
//   - The idempotency key: the server reads it from the tools/call _meta
//     (io.awaken/idempotency-key) on the crashed run and on its replay, the same both times
//     — the key of the operation, not of the attempt.
//   - The spans, all on the batch's one trace: an execute_tool span per attempt with the
//     GenAI attributes (the MCP tool an extension, echo a function, the platform's call id,
//     the arguments and result because trace_tool_content is on), the trace context the
//     server got in _meta naming that very span; a gate.decide span per call with the
//     decision; a gate.approval_wait span from parking to the approval; the
//     publisher.barrier span.
func TestPipeline_mcpIdempotencyKeyAndSpans(t *testing.T) {
	log := newCallLog(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	const run, metaCall = "run-idem", "functions.meta:0"
	crashIn := contracts.OperationID(run, 1, metaCall)
	ctx, stack := startPipeline(t, app.Options{TracerProvider: tp, Services: withAPI(),
		Faults: crashOnceInTool(func(op string) bool { return op == crashIn })}, `
consumers: {ack_wait: 1s}
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: {mode: replay_safe, max_attempts: 3}
policy:
  default_behavior: allow
  rules:
    - {pattern: echo, behavior: ask, timeout: 1h}
executors:
  trace_tool_content: true
  mcp:
    - {name: test, command: %q, args: ["-log", %q], trust_annotations: true}
`, serverBin, string(log))
	stack.waitCapability(t, "mcp__test__meta", contracts.CapabilityReplaySafe)
	c := stack.client

	sub := contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"mcp__test__meta", "echo"}},
		Calls: []contracts.ToolCall{
			{CallID: metaCall, ToolID: "mcp__test__meta", Arguments: []byte(`{}`)},
			{CallID: "toolu_echo", ToolID: "echo", Arguments: []byte(`{"text":"hi"}`)},
		}}
	tk := stacktest.Park(t, ctx, c, sub, "toolu_echo")
	if _, err := c.Approve(ctx, tk, "fine"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Await(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 2 || res.Results[0].Outcome != contracts.OutcomeCompleted || res.Results[1].Outcome != contracts.OutcomeCompleted {
		t.Fatalf("results %+v", res.Results)
	}

	// The key, on both runs of the MCP call.
	want := contracts.IdempotencyKey(crashIn)
	var keys, parents []string
	for _, line := range log.lines(t) {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "meta" && f[1] == crashIn {
			f = append(f, "") // a request without trace context logs none
			keys, parents = append(keys, f[2]), append(parents, f[3])
		}
	}
	if len(keys) != 2 || keys[0] != want || keys[1] != want {
		t.Fatalf("keys the server saw %q, want %s twice (the crashed run and its replay)", keys, want)
	}
	if text := res.Results[0].Output.Content[0].Text; !strings.Contains(text, `"io.awaken/idempotency-key":"`+want+`"`) {
		t.Errorf("the _meta the server echoed: %s", text)
	}

	// The spans. The barrier's is recorded once the results are out; wait for it.
	natstest.WaitFor(t, waitTimeout, func() bool { return len(named(spans.GetSpans(), telemetry.SpanBarrier)) > 0 },
		"the barrier span")
	all := spans.GetSpans()
	batchTrace := named(all, telemetry.SpanBarrier)[0].SpanContext.TraceID()
	metaSpans := named(all, "execute_tool mcp__test__meta")
	if len(metaSpans) != 2 {
		t.Fatalf("%d execute_tool spans of the MCP tool, want 2 (one per attempt)", len(metaSpans))
	}
	for i, s := range metaSpans {
		checkAttrs(t, s, map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "mcp__test__meta",
			"gen_ai.tool.call.id": metaCall, "gen_ai.tool.type": "extension", "gen_ai.tool.call.arguments": "{}",
			"awaken.attempt": int64(i + 1), "awaken.operation_id": crashIn})
		if s.SpanKind != trace.SpanKindInternal || s.SpanContext.TraceID() != batchTrace {
			t.Errorf("attempt %d: kind %v, trace %s, want internal on the batch's trace %s", i+1, s.SpanKind, s.SpanContext.TraceID(), batchTrace)
		}
		// The server got this span's context in _meta.traceparent.
		if wantParent := fmt.Sprintf("00-%s-%s-01", s.SpanContext.TraceID(), s.SpanContext.SpanID()); parents[i] != wantParent {
			t.Errorf("attempt %d: _meta traceparent %q, want %q (the execute_tool span)", i+1, parents[i], wantParent)
		}
	}
	if _, ok := attr(metaSpans[1], "gen_ai.tool.call.result"); !ok {
		t.Error("the completed MCP attempt has no gen_ai.tool.call.result")
	}
	echoSpans := named(all, "execute_tool echo")
	if len(echoSpans) != 1 {
		t.Fatalf("%d execute_tool spans of echo, want 1", len(echoSpans))
	}
	checkAttrs(t, echoSpans[0], map[string]any{"gen_ai.tool.type": "function", "gen_ai.tool.call.id": "toolu_echo",
		"gen_ai.tool.call.arguments": `{"text":"hi"}`, "gen_ai.tool.call.result": "hi"})

	decisions := map[string]string{}
	for _, s := range named(all, telemetry.SpanGateDecide) {
		id, _ := attr(s, "gen_ai.tool.call.id")
		d, _ := attr(s, "awaken.decision")
		decisions[fmt.Sprint(id)] = fmt.Sprint(d)
		if s.SpanContext.TraceID() != batchTrace {
			t.Errorf("gate.decide of %v off the batch's trace", id)
		}
	}
	if decisions[metaCall] != "allow" || decisions["toolu_echo"] != "ask" {
		t.Errorf("gate.decide spans: %v, want allow for the MCP call and ask for echo", decisions)
	}
	waits := named(all, telemetry.SpanApprovalWait)
	if len(waits) != 1 {
		t.Fatalf("%d approval wait spans, want 1", len(waits))
	}
	w := waits[0]
	checkAttrs(t, w, map[string]any{"gen_ai.tool.call.id": "toolu_echo", "awaken.resolution": "approved",
		"awaken.correlation_id": tk.CorrelationID})
	if w.SpanContext.TraceID() != batchTrace || !w.EndTime.After(w.StartTime) {
		t.Errorf("approval wait: trace %s (batch %s), %s → %s", w.SpanContext.TraceID(), batchTrace, w.StartTime, w.EndTime)
	}
	checkAttrs(t, named(all, telemetry.SpanBarrier)[0], map[string]any{"awaken.calls": int64(2), "awaken.calls_indeterminate": int64(0)})
}

// named returns the spans called name, in the order they ended.
func named(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) (any, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInterface(), true
		}
	}
	return nil, false
}

// checkAttrs fails unless s has every attribute of want with its value.
func checkAttrs(t *testing.T, s tracetest.SpanStub, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := attr(s, k); !ok || got != v {
			t.Errorf("span %s: %s = %v (%v), want %v", s.Name, k, got, ok, v)
		}
	}
}
