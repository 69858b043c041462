package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Standard OpenTelemetry environment variables read by [TracerProviderFromEnv]; the OTLP
// exporter and the SDK read the rest (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME...).
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// TracerProviderFromEnv builds the process's tracer provider from the standard OTEL_*
// environment (lookup is os.LookupEnv in production). Tracing is OFF by default: without
// OTEL_TRACES_EXPORTER or an OTLP endpoint, or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none, it returns a no-op provider that records nothing. Otherwise
// spans are batched to an OTLP/HTTP (protobuf) exporter configured by the OTEL_EXPORTER_OTLP_*
// variables; serviceName is the default service.name (OTEL_SERVICE_NAME overrides it).
// The returned shutdown flushes pending spans; call it once on exit.
func TracerProviderFromEnv(ctx context.Context, serviceName string, lookup func(string) (string, bool)) (trace.TracerProvider, func(context.Context) error, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	off := func(context.Context) error { return nil }
	if strings.EqualFold(get(EnvSDKDisabled), "true") {
		return noop.NewTracerProvider(), off, nil
	}
	exporter := strings.ToLower(get(EnvTracesExporter))
	endpoint := get(EnvTracesEndpoint)
	if endpoint == "" {
		endpoint = get(EnvEndpoint)
	}
	if exporter == "none" || (exporter == "" && endpoint == "") {
		return noop.NewTracerProvider(), off, nil
	}
	if exporter != "" && exporter != "otlp" {
		return nil, nil, fmt.Errorf("telemetry: %s=%q is not supported (use otlp or none)", EnvTracesExporter, exporter)
	}
	proto := get(EnvTracesProtocol)
	if proto == "" {
		proto = get(EnvProtocol)
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, nil, fmt.Errorf("telemetry: OTLP protocol %q is not supported (use http/protobuf)", proto)
	}
	exp, err := otlptracehttp.New(ctx) // reads OTEL_EXPORTER_OTLP_* itself
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(semconv.ServiceName(serviceName)))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	// Environment attributes (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME) win.
	envRes, err := resource.New(ctx, resource.WithFromEnv())
	if err == nil {
		if merged, merr := resource.Merge(res, envRes); merr == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}
