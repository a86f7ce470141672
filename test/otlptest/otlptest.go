// Package otlptest is an OTLP trace receiver for tests: the collector's
// trace service over gRPC and over HTTP (protobuf), keeping every span it
// is sent.
package otlptest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps the spans exported to it.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span // guarded by mu
	// services[i] is the service.name of spans[i]'s resource.
	services []string // guarded by mu
}

// StartGRPC serves OTLP/gRPC on a free loopback port until the test ends
// and returns the receiver and its endpoint URL (http://host:port).
func StartGRPC(t testing.TB) (*Receiver, string) {
	t.Helper()
	r := &Receiver{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r, "http://" + lis.Addr().String()
}

// StartHTTP serves OTLP/HTTP (protobuf, at /v1/traces) until the test ends
// and returns the receiver and its endpoint URL.
func StartHTTP(t testing.TB) (*Receiver, string) {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "want an ExportTraceServiceRequest at /v1/traces", http.StatusBadRequest)
			return
		}
		r.keep(&export)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// Export implements the collector's trace service.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.keep(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) keep(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s)
				r.services = append(r.services, service)
			}
		}
	}
}

// Spans returns the spans received so far and the service name of each.
func (r *Receiver) Spans() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.services...)
}
