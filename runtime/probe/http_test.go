package probe_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/runtime/probe"
)

func TestHTTPGet(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError) // never reached: redirects to other hosts are not followed
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)

	seen := make(chan http.Header, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "healthy") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/moved-away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+"/x", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, strings.Repeat("x", 50000)) })
	mux.HandleFunc("/slow", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/headers", func(_ http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Host", r.Host)
		seen <- h
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tls := httptest.NewTLSServer(mux) // a self-signed certificate: accepted, as kubelet does
	defer tls.Close()

	r := probe.New(nil, probe.Config{Version: "1.2.3"})
	get := func(t *testing.T, base, path string, header http.Header, timeout time.Duration) (bool, string) {
		t.Helper()
		u, err := url.Parse(base + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.HTTPGet(t.Context(), u, header, timeout)
		if err != nil {
			t.Fatal(err)
		}
		return got.OK, got.Message
	}

	cases := []struct {
		name    string
		base    string
		path    string
		ok      bool
		message string
	}{
		{"200", srv.URL, "/ok", true, "healthy"},
		{"https with a self-signed certificate", tls.URL, "/ok", true, "healthy"},
		{"503", srv.URL, "/fail", false, "HTTP probe failed with statuscode: 503"},
		{"404", srv.URL, "/nothing", false, "statuscode: 404"},
		{"redirect to the same host is followed", srv.URL, "/moved", true, "healthy"},
		{"redirect to another host is a success with a warning", srv.URL, "/moved-away", true, "probe terminated redirects"},
		{"a redirect loop fails", srv.URL, "/loop", false, "stopped after 10 redirects"},
		{"nothing listening", "http://127.0.0.1:1", "/", false, "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, msg := get(t, tc.base, tc.path, nil, 10*time.Second)
			if ok != tc.ok || !strings.Contains(msg, tc.message) {
				t.Fatalf("got OK=%v %q, want OK=%v and a message with %q", ok, msg, tc.ok, tc.message)
			}
		})
	}

	t.Run("the body kept is at most 10 KiB", func(t *testing.T) {
		if ok, msg := get(t, srv.URL, "/big", nil, 10*time.Second); !ok || len(msg) != 10<<10 {
			t.Fatalf("OK=%v with %d bytes", ok, len(msg))
		}
	})
	t.Run("timeout", func(t *testing.T) {
		if ok, msg := get(t, srv.URL, "/slow", nil, 100*time.Millisecond); ok || !strings.Contains(msg, "deadline exceeded") {
			t.Fatalf("got OK=%v %q, want a timeout", ok, msg)
		}
	})
	t.Run("default headers", func(t *testing.T) {
		if ok, _ := get(t, srv.URL, "/headers", nil, 10*time.Second); !ok {
			t.Fatal("not OK")
		}
		h := <-seen
		if h.Get("User-Agent") != "jetlet-probe/1.2.3" || h.Get("Accept") != "*/*" {
			t.Fatalf("headers %v", h)
		}
	})
	t.Run("headers given override the defaults; Host sets the host", func(t *testing.T) {
		given := http.Header{"User-Agent": {"mine"}, "Accept": {"text/plain"}, "Host": {"example.test"}, "X-Custom": {"a", "b"}}
		if ok, _ := get(t, srv.URL, "/headers", given, 10*time.Second); !ok {
			t.Fatal("not OK")
		}
		h := <-seen
		if h.Get("User-Agent") != "mine" || h.Get("Accept") != "text/plain" || h.Get("X-Host") != "example.test" || len(h.Values("X-Custom")) != 2 {
			t.Fatalf("headers %v", h)
		}
	})
}
