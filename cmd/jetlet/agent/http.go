package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readiness holds named conditions; /readyz is 200 only when all are true.
type readiness struct {
	mu    sync.Mutex
	conds map[string]func() error
}

// add registers a condition; check returns nil when it holds, or why not.
func (r *readiness) add(name string, check func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conds == nil {
		r.conds = map[string]func() error{}
	}
	r.conds[name] = check
}

// failing lists the conditions that do not hold, sorted, with their reasons.
func (r *readiness) failing() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, check := range r.conds {
		if err := check(); err != nil {
			out = append(out, name+": "+err.Error())
		}
	}
	sort.Strings(out)
	return out
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(buildInfo())
	return reg
}

// httpServer serves /healthz, /readyz and /metrics.
type httpServer struct {
	srv *http.Server
	lis net.Listener
}

func listenHTTP(addr string, ready *readiness, reg *prometheus.Registry, profiling bool) (*httpServer, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if failing := ready.failing(); len(failing) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(failing, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if profiling {
		sampleContention()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return &httpServer{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		lis: lis,
	}, nil
}

// sampleContention fills the mutex and block profiles, empty unless
// sampled: a lock contended one time in 10, and about one blocking event
// per millisecond blocked, cost little and show what serialises syncs. The
// embedded NATS server sets the block rate as it starts (to none): with
// --profiling it is called again after.
func sampleContention() {
	goruntime.SetMutexProfileFraction(10)
	goruntime.SetBlockProfileRate(int(time.Millisecond))
}

func (h *httpServer) addr() string { return h.lis.Addr().String() }

// serve runs until shutdown; it returns nil on a clean shutdown.
func (h *httpServer) serve() error {
	if err := h.srv.Serve(h.lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (h *httpServer) shutdown(ctx context.Context) error { return h.srv.Shutdown(ctx) }

// buildInfo is jetlet_build_info: 1, labelled with what was built.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "jetlet_build_info",
		Help:        "1, labelled with jetlet's version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": cli.Version(), "revision": revision, "goversion": goruntime.Version()},
	})
	g.Set(1)
	return g
}
