// Package natstest runs a real, embedded nats-server with JetStream for tests.
package natstest

import (
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options returns server options for a private JetStream server on a random
// loopback port, storing under dir.
func Options(dir string) server.Options {
	return server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  dir,
	}
}

// Start starts a server with opts and stops it when the test ends.
func Start(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(&opts)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats server not ready within 10s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// RunServer starts a JetStream server storing under a temporary directory.
func RunServer(t testing.TB) *server.Server {
	t.Helper()
	return Start(t, Options(t.TempDir()))
}

// Connect connects to s and returns the connection and its JetStream context,
// both closed when the test ends.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("connect %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// MapIntentPartitions gives s's global account the subject mapping that
// shards intents into n partition streams, as a server's configuration
// does (schemas.Subjects.IntentPartitionMapping).
func MapIntentPartitions(t testing.TB, s *server.Server, prefix string, n int) {
	t.Helper()
	src, dest := schemas.Subjects{Prefix: prefix}.IntentPartitionMapping(n)
	if err := s.GlobalAccount().AddMapping(src, dest); err != nil {
		t.Fatalf("map %s to %s: %v", src, dest, err)
	}
}
