package probe_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/runtime/probe"
)

func TestTCPSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	r := probe.New(nil, probe.Config{})

	got, err := r.TCPSocket(t.Context(), addr, 10*time.Second)
	if err != nil || !got.OK {
		t.Fatalf("listening: %+v %v", got, err)
	}
	_ = ln.Close()
	got, err = r.TCPSocket(t.Context(), addr, 10*time.Second)
	if err != nil || got.OK || !strings.Contains(got.Message, "connection refused") {
		t.Fatalf("closed: %+v %v, want a refused connection", got, err)
	}
}
