// Command probeserver is the tiny server the probe tests run in a container
// of the embedded runtime (whose containers run host binaries): an HTTP
// server whose /ready answers 200 while a file exists and 503 otherwise, and
// a gRPC server with the standard health service.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	httpAddr := flag.String("http", "", "HTTP listen address (/ready)")
	readyFile := flag.String("ready-file", "", "/ready answers 200 while this file exists")
	grpcAddr := flag.String("grpc", "", "gRPC listen address (grpc.health.v1.Health, SERVING)")
	flag.Parse()

	errs := make(chan error, 2)
	if *grpcAddr != "" {
		ln, err := net.Listen("tcp", *grpcAddr)
		if err != nil {
			log.Fatal(err)
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, health.NewServer()) // the server's health: SERVING
		go func() { errs <- srv.Serve(ln) }()
	}
	if *httpAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
			if _, err := os.Stat(*readyFile); err != nil {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ready"))
		})
		go func() { errs <- http.ListenAndServe(*httpAddr, mux) }()
	}
	log.Fatal(<-errs)
}
