package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

func spanAttr(s tracetest.SpanStub, key string) (any, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInterface(), true
		}
	}
	return nil, false
}

// TestToolSpanContentIsOptIn: without the opt-in an execute_tool span carries neither the
// arguments nor the result; with it, both; an error output sets error.type and the error
// status, and no result.
func TestToolSpanContentIsOptIn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := New("brain-exec", nil, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	call := ToolCall{ToolID: "charge", CallID: "call_1", ToolType: ToolTypeFunction, RunID: "run-1", Step: 2,
		OperationID: "tool-batch:run-1:2:call_1", Attempt: 1, Arguments: []byte(`{"amount":3}`)}
	_, end := tel.StartToolSpan(context.Background(), call)
	end(contracts.TextOutput("call_1", "charged"))
	call.Content = true
	_, end = tel.StartToolSpan(context.Background(), call)
	end(contracts.TextOutput("call_1", "charged"))
	_, end = tel.StartToolSpan(context.Background(), call)
	end(contracts.ExecutionFailed("card declined").Output("call_1"))

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, s := range spans {
		if s.Name != "execute_tool charge" || s.SpanKind != trace.SpanKindInternal {
			t.Errorf("span %d: %q kind %v", i, s.Name, s.SpanKind)
		}
		if v, _ := spanAttr(s, "gen_ai.operation.name"); v != "execute_tool" {
			t.Errorf("span %d: gen_ai.operation.name %v", i, v)
		}
		if v, _ := spanAttr(s, "gen_ai.tool.call.id"); v != "call_1" {
			t.Errorf("span %d: gen_ai.tool.call.id %v", i, v)
		}
	}
	if _, ok := spanAttr(spans[0], "gen_ai.tool.call.arguments"); ok {
		t.Error("arguments recorded without the opt-in")
	}
	if _, ok := spanAttr(spans[0], "gen_ai.tool.call.result"); ok {
		t.Error("result recorded without the opt-in")
	}
	if v, _ := spanAttr(spans[1], "gen_ai.tool.call.arguments"); v != `{"amount":3}` {
		t.Errorf("opted-in arguments %v", v)
	}
	if v, _ := spanAttr(spans[1], "gen_ai.tool.call.result"); v != "charged" {
		t.Errorf("opted-in result %v", v)
	}
	if v, _ := spanAttr(spans[2], "error.type"); v != ErrorTypeToolError || spans[2].Status.Code != codes.Error {
		t.Errorf("error output: error.type %v, status %v", v, spans[2].Status)
	}
	if _, ok := spanAttr(spans[2], "gen_ai.tool.call.result"); ok {
		t.Error("an error output recorded as a result")
	}
}

// TestRecordSpanJoinsTheRecordedTrace: a span recorded after the fact keeps its real
// start and end and joins the trace its traceparent names.
func TestRecordSpanJoinsTheRecordedTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := New("gate", nil, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	ctx, parent := tel.Tracer().Start(context.Background(), "batch")
	tp := tel.TraceParent(ctx)
	parent.End()
	start := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	tel.RecordSpan(context.Background(), tp, SpanApprovalWait, start, start.Add(time.Minute))
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	w := spans[1]
	if w.Parent.SpanID() != spans[0].SpanContext.SpanID() || w.SpanContext.TraceID() != spans[0].SpanContext.TraceID() {
		t.Errorf("recorded span not a child of the traceparent's span")
	}
	if !w.StartTime.Equal(start) || w.EndTime.Sub(w.StartTime) != time.Minute {
		t.Errorf("recorded span %s → %s", w.StartTime, w.EndTime)
	}
}
