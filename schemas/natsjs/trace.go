package natsjs

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// propagator carries W3C trace context (traceparent, tracestate) between
// message headers and contexts.
var propagator = propagation.TraceContext{}

// HeaderCarrier adapts NATS headers to OpenTelemetry's TextMapCarrier.
type HeaderCarrier nats.Header

func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// ExtractTrace returns ctx carrying the trace context found in h.
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, HeaderCarrier(h))
}

// InjectTrace writes the trace context of ctx into h.
func InjectTrace(ctx context.Context, h nats.Header) {
	propagator.Inject(ctx, HeaderCarrier(h))
}
