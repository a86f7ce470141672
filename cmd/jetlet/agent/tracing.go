package agent

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracingEnabled: an OTLP endpoint is set and the SDK is not disabled, as
// the OpenTelemetry SDK's environment variables say. Without an endpoint
// nothing is exported: spans go to the no-op provider and cost next to nothing.
func tracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return false // "none", or an exporter jetlet does not have
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// setupTracing installs the OpenTelemetry SDK as the global tracer provider
// when tracingEnabled, with an OTLP exporter over gRPC or HTTP
// (OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL: grpc, or http/protobuf, the
// default) configured by the standard OTEL_* variables (endpoint, headers,
// TLS, timeout, sampler, batch processor, service name and resource). It
// returns what flushes and stops it at exit.
func setupTracing(ctx context.Context, node string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !tracingEnabled(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter sdktrace.SpanExporter
	switch protocol {
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: jetlet exports traces over grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Defaults first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("jetlet"), semconv.ServiceVersion(cli.Version()), semconv.HostName(node)))
	if err != nil {
		return nil, err
	}
	if res, err = resource.Merge(res, envResource(ctx)); err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(intentSpansOnly{sdktrace.NewBatchSpanProcessor(exporter)}),
	)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

func envResource(ctx context.Context) *resource.Resource {
	res, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return resource.Empty() // a malformed OTEL_RESOURCE_ATTRIBUTES is the SDK's to report
	}
	return res
}

// intentSpansOnly exports every span but the CRI calls jetlet makes outside
// any intent (the relist every second, garbage collection): each would be a
// trace of its own, many a minute, that nobody asked for.
type intentSpansOnly struct{ sdktrace.SpanProcessor }

func (p intentSpansOnly) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.Parent().IsValid() && s.SpanKind() == trace.SpanKindClient {
		return
	}
	p.SpanProcessor.OnEnd(s)
}
