package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Names of the CloudEvents distributed-tracing extension attributes (W3C Trace Context).
const (
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

// InstrumentationName is the OpenTelemetry instrumentation scope of awaken's spans.
const InstrumentationName = "github.com/awaken-dev/awaken"

// Telemetry is one service's handle on the process's metrics and tracer. Its methods are
// safe for concurrent use, and every method is a no-op on a nil *Telemetry, so services
// call them unconditionally.
type Telemetry struct {
	service string
	m       *Metrics
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator

	mu    sync.Mutex
	bound map[string]<-chan struct{} // durable → its loop's Done channel

	work inflightSet // the deliveries being handled, for [Telemetry.InFlight]
}

// New returns the telemetry of service on m (nil m: no metrics) with spans from tp (nil
// tp: no tracing). Context is propagated with the W3C Trace Context format, the one the
// CloudEvents distributed-tracing extension specifies.
func New(service string, m *Metrics, tp trace.TracerProvider) *Telemetry {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Telemetry{
		service: service,
		m:       m,
		tracer:  tp.Tracer(InstrumentationName, trace.WithInstrumentationAttributes(attribute.String("awaken.service", service))),
		prop:    propagation.TraceContext{},
		bound:   make(map[string]<-chan struct{}),
	}
}

// Service returns the service name the telemetry reports for.
func (t *Telemetry) Service() string {
	if t == nil {
		return ""
	}
	return t.service
}

// Tracer returns the service's tracer (a no-op tracer on a nil Telemetry).
func (t *Telemetry) Tracer() trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(InstrumentationName)
	}
	return t.tracer
}

// GateDecision counts one permission decision the gate committed, by its audit label.
// Call it once per recorded decision (after the write that records it succeeded), not per
// delivery, so redeliveries do not inflate it.
func (t *Telemetry) GateDecision(label string) {
	if t == nil || t.m == nil {
		return
	}
	t.m.gateDecisions.WithLabelValues(label).Inc()
}

// CallPublished counts one call of a batch whose results were published, by outcome and
// whether its output is an error. The publisher calls it once per call after the batch's
// phase became published.
func (t *Telemetry) CallPublished(outcome contracts.Outcome, isError bool) {
	if t == nil || t.m == nil {
		return
	}
	t.m.calls.WithLabelValues(string(outcome), strconv.FormatBool(isError)).Inc()
}

// Indeterminate counts one call this service committed as indeterminate; reason is one of
// the Reason* categories (bounded), never free text.
func (t *Telemetry) Indeterminate(reason string) {
	if t == nil || t.m == nil {
		return
	}
	t.m.indeterminate.WithLabelValues(t.service, reason).Inc()
}

// BatchAccepted counts a batch the batcher created (not a re-drive of an existing one).
func (t *Telemetry) BatchAccepted() { t.batch(BatchAccepted, "") }

// BatchRejected counts a submission the batcher rejected, by rejection code.
func (t *Telemetry) BatchRejected(code contracts.RejectCode) { t.batch(BatchRejected, string(code)) }

// BatchPublished counts a batch whose results the publisher published (phase → published).
func (t *Telemetry) BatchPublished() { t.batch(BatchPublished, "") }

func (t *Telemetry) batch(state, code string) {
	if t == nil || t.m == nil {
		return
	}
	t.m.batches.WithLabelValues(state, code).Inc()
}

// Inject writes the trace context of ctx's span into e's traceparent/tracestate extension
// attributes; it does nothing when ctx carries no valid span. It is a [bus.Injector].
func (t *Telemetry) Inject(ctx context.Context, e *cloudevent.Event) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if e.Extensions == nil {
		e.Extensions = make(map[string]string, 2)
	}
	t.prop.Inject(ctx, propagation.MapCarrier(e.Extensions))
}

// Extract returns ctx carrying the remote span context named by e's traceparent and
// tracestate extension attributes, if any.
func (t *Telemetry) Extract(ctx context.Context, e cloudevent.Event) context.Context {
	if t == nil || e.Extensions[ExtTraceParent] == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{ExtTraceParent: e.Extensions[ExtTraceParent]}
	if ts := e.Extensions[ExtTraceState]; ts != "" {
		carrier[ExtTraceState] = ts
	}
	return t.prop.Extract(ctx, carrier)
}

// Observer returns the [bus.Observer] of the service's consume loops: per consumer it
// counts settlements, redeliveries and dead letters, times the handler, and runs it in a
// consumer span that continues the trace the message carries. Nil on a nil Telemetry.
func (t *Telemetry) Observer() bus.Observer {
	if t == nil {
		return nil
	}
	return observer{t}
}

// Ready reports whether at least one consume loop is bound and none has stopped: the
// service's "consumers bound" readiness condition.
func (t *Telemetry) Ready() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.bound) == 0 {
		return errors.New(t.service + ": no consumer bound yet")
	}
	for durable, done := range t.bound {
		select {
		case <-done:
			return errors.New(t.service + ": consumer " + durable + " stopped")
		default:
		}
	}
	return nil
}

type observer struct{ t *Telemetry }

// Bound records a running consume loop for readiness.
func (o observer) Bound(durable string, done <-chan struct{}) {
	o.t.mu.Lock()
	o.t.bound[durable] = done
	o.t.mu.Unlock()
}

// workRef holds the identifying fields every work and wire event shares; unknown fields
// are ignored. Decoding it costs one small JSON pass, done only for recorded spans.
type workRef struct {
	BatchID string `json:"batch_id"`
	RunID   string `json:"run_id"`
	Step    *int64 `json:"step"`
	CallID  string `json:"call_id"`
	Index   *int   `json:"index"`
}

// Begin counts the delivery and opens its span.
func (o observer) Begin(ctx context.Context, d bus.Delivery) (context.Context, func(bus.Observation)) {
	t := o.t
	if t.m != nil && d.NumDelivered > 1 {
		t.m.redeliveries.WithLabelValues(d.Consumer).Inc()
	}
	workID := t.work.add(d)
	ctx = t.Extract(ctx, d.Event)
	ctx, span := t.tracer.Start(ctx, d.Consumer, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", d.Subject),
			attribute.String("messaging.consumer.group.name", d.Consumer),
			attribute.Int64("messaging.nats.delivered", int64(d.NumDelivered)),
			attribute.Int64("messaging.nats.stream_sequence", int64(d.StreamSeq)),
			attribute.String("cloudevents.event_id", d.Event.ID),
			attribute.String("cloudevents.event_type", d.Event.Type),
			attribute.String("awaken.service", t.service),
		))
	if span.IsRecording() {
		if ref, ok := refOf(d.Event.Data, d.Event.Subject); ok {
			attrs := make([]attribute.KeyValue, 0, 4)
			for k, v := range map[string]string{"awaken.batch_id": ref.BatchID, "awaken.run_id": ref.RunID, "awaken.call_id": ref.CallID} {
				if v != "" {
					attrs = append(attrs, attribute.String(k, v))
				}
			}
			if ref.Index != nil {
				attrs = append(attrs, attribute.Int("awaken.call_index", *ref.Index))
			}
			span.SetAttributes(attrs...)
		}
	}
	return ctx, func(ob bus.Observation) {
		t.work.remove(workID)
		if t.m != nil {
			t.m.messages.WithLabelValues(d.Consumer, string(ob.Settlement)).Inc()
			if ob.Handled {
				t.m.duration.WithLabelValues(d.Consumer).Observe(ob.HandlerDuration.Seconds())
			}
			if ob.Settlement == bus.SettledDeadLetter {
				t.m.deadLetters.WithLabelValues(d.Consumer, string(ob.Code)).Inc()
			}
		}
		span.SetAttributes(attribute.String("awaken.settlement", string(ob.Settlement)))
		if ob.Code != "" {
			span.SetAttributes(attribute.String("awaken.dead_letter_code", string(ob.Code)))
		}
		if ob.Err != nil {
			span.RecordError(ob.Err)
			span.SetStatus(codes.Error, ob.Err.Error())
		} else if ob.Settlement == bus.SettledDeadLetter {
			span.SetStatus(codes.Error, "dead-lettered: "+string(ob.Code))
		}
		span.End()
	}
}

// TraceParent returns the W3C traceparent of ctx's span ("" when it has none), so a
// durable record can remember the trace its work belongs to.
func (t *Telemetry) TraceParent(ctx context.Context) string {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	return c[ExtTraceParent]
}

// Rejoin starts a span named name as a child of the span that traceparent names, so work
// that resumes a parked call (an approval, a scheduled trigger — each arriving in a trace
// of its own) stays in the trace of its batch; what the returned ctx publishes carries that
// trace on. An empty traceparent, or a nil Telemetry, leaves ctx as it is.
func (t *Telemetry) Rejoin(ctx context.Context, traceparent, name string) (context.Context, func()) {
	if t == nil || traceparent == "" {
		return ctx, func() {}
	}
	parent := t.prop.Extract(context.Background(), propagation.MapCarrier{ExtTraceParent: traceparent})
	sc := trace.SpanContextFromContext(parent)
	if !sc.IsValid() {
		return ctx, func() {}
	}
	ctx, span := t.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, sc), name,
		trace.WithLinks(trace.LinkFromContext(ctx)))
	return ctx, func() { span.End() }
}

// refOf reads the run, batch and call a delivery names from its data — or, for a
// call-record revision, whose data is the record (the call, not its batch), from the
// event's subject attribute, the batch id.
func refOf(data []byte, ceSubject string) (workRef, bool) {
	var ref workRef
	if json.Unmarshal(data, &ref) != nil {
		return ref, false
	}
	if ref.BatchID == "" && ref.RunID != "" && ref.Step != nil {
		ref.BatchID = contracts.BatchID(ref.RunID, *ref.Step)
	}
	if ref.BatchID == "" {
		if run, _, err := contracts.ParseBatchID(ceSubject); err == nil {
			ref.RunID, ref.BatchID = run, ceSubject
		}
	}
	return ref, true
}

// LimitEvent counts one evaluation of a host limit by its outcome (counted, held,
// blocked, asked, would, released), for awaken_limit_events_total{limit,outcome}.
func (t *Telemetry) LimitEvent(limit, outcome string) {
	if t == nil || t.m == nil {
		return
	}
	t.m.limitEvents.WithLabelValues(limit, outcome).Inc()
}
