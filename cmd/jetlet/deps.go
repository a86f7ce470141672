package main

// Blank imports pin the design's libraries in go.mod while the packages that use
// them are being written; each goes away as real code imports it.
import (
	_ "github.com/cenkalti/backoff/v4"
	_ "github.com/google/uuid"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/rs/zerolog"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	_ "go.opentelemetry.io/otel"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "sigs.k8s.io/yaml"

	_ "github.com/jetlet/jetlet/schemas"
)

func main() {}
