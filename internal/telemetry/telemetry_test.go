package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
)

func TestTracingIsOffByDefault(t *testing.T) {
	rows := []struct {
		name    string
		env     map[string]string
		off     bool
		wantErr bool
	}{
		{"nothing set", nil, true, false},
		{"exporter none", map[string]string{EnvTracesExporter: "none", EnvEndpoint: "http://collector:4318"}, true, false},
		{"sdk disabled", map[string]string{EnvSDKDisabled: "true", EnvEndpoint: "http://collector:4318"}, true, false},
		{"endpoint set", map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}, false, false},
		{"exporter otlp", map[string]string{EnvTracesExporter: "otlp"}, false, false},
		{"unsupported exporter", map[string]string{EnvTracesExporter: "zipkin"}, false, true},
		{"grpc protocol refused", map[string]string{EnvEndpoint: "http://127.0.0.1:4317", EnvProtocol: "grpc"}, false, true},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			tp, shutdown, err := TracerProviderFromEnv(context.Background(), "awaken-test", func(k string) (string, bool) {
				v, ok := r.env[k]
				return v, ok
			})
			if r.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = shutdown(context.Background()) }()
			_, isNoop := tp.(noop.TracerProvider)
			if isNoop != r.off {
				t.Errorf("no-op provider = %v, want %v (%T)", isNoop, r.off, tp)
			}
		})
	}
}

func TestInjectExtractRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	tel := New("gate", nil, tp)
	ctx, span := tp.Tracer("t").Start(context.Background(), "handler")
	defer span.End()
	var e cloudevent.Event
	tel.Inject(ctx, &e)
	if e.Extensions[ExtTraceParent] == "" {
		t.Fatal("no traceparent injected")
	}
	got := trace.SpanContextFromContext(tel.Extract(context.Background(), e))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() {
		t.Errorf("extracted %v, want the remote %v", got, span.SpanContext())
	}
	var none cloudevent.Event
	tel.Inject(context.Background(), &none)
	if none.Extensions != nil {
		t.Errorf("a context without a span injected %v", none.Extensions)
	}
}

func TestNilTelemetryIsSafe(t *testing.T) {
	var tel *Telemetry
	tel.GateDecision("allow")
	tel.CallPublished("completed", false)
	tel.Indeterminate(ReasonCancelled)
	tel.BatchAccepted()
	tel.BatchRejected("conflict")
	tel.BatchPublished()
	tel.Inject(context.Background(), &cloudevent.Event{})
	if tel.Observer() != nil {
		t.Error("a nil telemetry returned an observer")
	}
	if err := tel.Ready(); err != nil {
		t.Error(err)
	}
}

func TestReadiness(t *testing.T) {
	stopped := make(chan struct{})
	close(stopped)
	rows := []struct {
		name  string
		bind  map[string]chan struct{}
		ready bool
	}{
		{"nothing bound yet", nil, false},
		{"bound and running", map[string]chan struct{}{"gate-requests": make(chan struct{})}, true},
		{"one loop stopped", map[string]chan struct{}{"gate-requests": make(chan struct{}), "gate-resume": stopped}, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			tel := New("gate", NewMetrics(), nil)
			for d, ch := range r.bind {
				tel.Observer().Bound(d, ch)
			}
			if err := tel.Ready(); (err == nil) != r.ready {
				t.Errorf("Ready() = %v, want ready %v", err, r.ready)
			}
		})
	}
}

func TestHandlerEndpoints(t *testing.T) {
	notReady := errors.New("consumer gate-requests stopped")
	rows := []struct {
		name  string
		path  string
		ready func(context.Context) error
		code  int
	}{
		{"liveness", "/healthz", func(context.Context) error { return notReady }, http.StatusOK},
		{"ready", "/readyz", func(context.Context) error { return nil }, http.StatusOK},
		{"not ready", "/readyz", func(context.Context) error { return notReady }, http.StatusServiceUnavailable},
		{"metrics", "/metrics", nil, http.StatusOK},
		{"unknown path", "/nope", nil, http.StatusNotFound},
	}
	m := NewMetrics()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Handler(m, r.ready).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, r.path, nil))
			if rec.Code != r.code {
				t.Errorf("GET %s = %d, want %d (%s)", r.path, rec.Code, r.code, rec.Body)
			}
		})
	}
}
