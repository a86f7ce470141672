package probe_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/jetlet/jetlet/runtime/probe"
)

// The handlers' cost per probe, server included (it runs in the same
// process): go test -run '^$' -bench . ./runtime/probe
func BenchmarkHTTPGet(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/")
	r := probe.New(nil, probe.Config{})
	for b.Loop() {
		if out, err := r.HTTPGet(b.Context(), u, nil, time.Second); err != nil || !out.OK {
			b.Fatal(out, err)
		}
	}
}

func BenchmarkTCPSocket(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	r := probe.New(nil, probe.Config{})
	for b.Loop() {
		if out, err := r.TCPSocket(b.Context(), ln.Addr().String(), time.Second); err != nil || !out.OK {
			b.Fatal(out, err)
		}
	}
}
