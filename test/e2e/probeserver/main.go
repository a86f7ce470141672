// Command probeserver is the tiny server the probe tests run in a container
// of the embedded runtime (whose containers run host binaries): an HTTP
// server whose /ready answers 200 while a file exists and 503 otherwise, and
// a gRPC server with the standard health service. With -get it is instead
// a client: it prints the body of an HTTP GET (retried until it answers) and
// exits, for the network tests' pods.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	httpAddr := flag.String("http", "", "HTTP listen address (/ready)")
	readyFile := flag.String("ready-file", "", "/ready answers 200 while this file exists")
	grpcAddr := flag.String("grpc", "", "gRPC listen address (grpc.health.v1.Health, SERVING)")
	get := flag.String("get", "", "print the body of a GET of this URL, retried for 30s until it answers 200, and exit")
	flag.Parse()
	if *get != "" {
		os.Exit(fetch(*get))
	}

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

// fetch prints the body of a GET of url, retrying until it answers 200 or
// 30s pass.
func fetch(url string) int {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Printf("%s\n", body)
				return 0
			}
			err = fmt.Errorf("%s: %s", resp.Status, body)
		}
		if time.Now().After(deadline) {
			log.Print(err)
			return 1
		}
		time.Sleep(200 * time.Millisecond) // a real client's retry, not a test's wait
	}
}
