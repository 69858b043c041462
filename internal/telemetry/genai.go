package telemetry

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Values of gen_ai.tool.type (OpenTelemetry GenAI semantic conventions): a function the
// application runs itself (an in-process Go tool, a WebAssembly module), or an extension
// that calls an external system on the agent's behalf (an MCP server).
const (
	ToolTypeFunction  = "function"
	ToolTypeExtension = "extension"
)

// Names of awaken's own spans on a batch's trace (besides the consumer spans named after
// their durable consumer and the execute_tool spans).
const (
	SpanGateDecide   = "gate.decide"
	SpanApprovalWait = "gate.approval_wait"
	SpanBarrier      = "publisher.barrier"
)

// ErrorTypeToolError is the error.type of an execute_tool span whose output is a
// model-visible error.
const ErrorTypeToolError = "tool_error"

// maxContentAttribute caps the arguments and the result recorded on a span (an exporter
// and a tracing backend have limits of their own; a 64 MiB output must not reach them).
const maxContentAttribute = 64 << 10

// ToolCall names one attempt of a call for its execute_tool span.
type ToolCall struct {
	ToolID, CallID, ToolType string
	RunID, OperationID       string
	Step                     int64
	Index                    int
	Attempt                  uint16
	// Arguments are recorded as gen_ai.tool.call.arguments when Content is set.
	Arguments json.RawMessage
	// Content opts in to recording the arguments and the result.
	Content bool
}

// StartToolSpan starts the execute_tool span of one attempt of a call, as the
// OpenTelemetry GenAI semantic conventions name it: "execute_tool {tool}", kind internal,
// gen_ai.operation.name execute_tool, gen_ai.tool.name (the configured tool id),
// gen_ai.tool.call.id (the platform's call id, the model provider's), gen_ai.tool.type,
// and the arguments only when c.Content opts in. The returned ctx carries the span, so
// what the body sends (an MCP request's _meta) continues it; end records the output (its
// result only when opted in; error.type tool_error for an error output) and ends the span.
func (t *Telemetry) StartToolSpan(ctx context.Context, c ToolCall) (context.Context, func(out contracts.ToolOutput)) {
	ctx, span := t.Tracer().Start(ctx, "execute_tool "+c.ToolID, trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		// Tracing off (the default) or not sampled: nothing to build on the call's path.
		return ctx, func(contracts.ToolOutput) { span.End() }
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(c.ToolID),
		semconv.GenAIToolCallID(c.CallID),
		semconv.GenAIToolType(c.ToolType),
		attribute.String("awaken.operation_id", c.OperationID),
		attribute.String("awaken.batch_id", contracts.BatchID(c.RunID, c.Step)),
		attribute.String("awaken.run_id", c.RunID),
		attribute.Int("awaken.call_index", c.Index),
		attribute.Int("awaken.attempt", int(c.Attempt)),
	}
	if c.Content {
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(capped(string(c.Arguments))))
	}
	span.SetAttributes(attrs...)
	return ctx, func(out contracts.ToolOutput) {
		if out.IsError {
			span.SetAttributes(semconv.ErrorTypeKey.String(ErrorTypeToolError))
			span.SetStatus(codes.Error, capped(out.RenderText()))
		} else if c.Content {
			span.SetAttributes(semconv.GenAIToolCallResultKey.String(capped(resultText(out))))
		}
		span.End()
	}
}

// resultText is the result as the span records it: the text of a one-text-block output,
// else the JSON of its content blocks (and of its structured content, when it has one).
func resultText(out contracts.ToolOutput) string {
	if len(out.Content) == 1 && out.Content[0].Type == contracts.BlockText && out.StructuredContent == nil {
		return out.Content[0].Text
	}
	v := any(out.Content)
	if out.StructuredContent != nil {
		v = map[string]any{"content": out.Content, "structured_content": out.StructuredContent}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func capped(s string) string {
	if len(s) <= maxContentAttribute {
		return s
	}
	n := maxContentAttribute
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// StartSpan starts an internal span named name under ctx's span; the caller sets its
// attributes when span.IsRecording() (nothing to build while tracing is off) and ends it.
func (t *Telemetry) StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return t.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
}

// RecordSpan records a finished span named name that ran from start to end — a wait no
// process could hold a span open for, such as an approval or the barrier — as a child of
// the span traceparent names (the batch's trace recorded on a call) or, when it names
// none, of ctx's span.
func (t *Telemetry) RecordSpan(ctx context.Context, traceparent, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if t == nil {
		return
	}
	parent := ctx
	if traceparent != "" {
		remote := trace.SpanContextFromContext(t.prop.Extract(context.Background(), propagation.MapCarrier{ExtTraceParent: traceparent}))
		if remote.IsValid() {
			parent = trace.ContextWithRemoteSpanContext(ctx, remote)
		}
	}
	_, span := t.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}

// CallAttributes are the attributes naming call index of b on awaken's gate spans: the
// GenAI tool name and call id, the batch and the index.
func CallAttributes(b *contracts.BatchSubmission, index int) []attribute.KeyValue {
	c := b.Calls[index]
	return []attribute.KeyValue{
		semconv.GenAIToolName(c.ToolID),
		semconv.GenAIToolCallID(c.CallID),
		attribute.String("awaken.batch_id", b.BatchID()),
		attribute.String("awaken.run_id", b.RunID),
		attribute.Int("awaken.call_index", index),
	}
}
