// Package probe runs the handlers of probes and lifecycle hooks against a
// running container, as kubelet's prober and lifecycle handler runner do:
// exec through the CRI's ExecSync, httpGet, tcpSocket and the gRPC health
// service. It implements kubecontainer.HandlerRunner without importing
// anything under reconcile (the dependency rule: nothing under runtime/
// imports reconcile); the shared result type is runtime/probe/outcome's.
package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxMessage bounds the output or body a handler keeps for its message, as
// kubelet's probers read at most 10 KiB.
const maxMessage = 10 << 10

// maxRedirects is how many redirects to the same host an httpGet follows
// (net/http's and kubelet's limit).
const maxRedirects = 10

// ExecSyncer is the CRI call the exec handler makes; *runtime.Client has it.
// A command that runs and exits non-zero is not an error; a command the
// runtime killed at timeout fails with crierr.ErrDeadlineExceeded.
type ExecSyncer interface {
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// Config holds what a Runner needs besides the runtime.
type Config struct {
	// Version goes into the default User-Agent of httpGet and gRPC handlers,
	// "jetlet-probe/<Version>" (kubelet's is "kube-probe/<version>").
	Version string
}

// Runner runs handlers. It is safe for concurrent use: it holds only the
// runtime, an HTTP client and constants.
type Runner struct {
	rt        ExecSyncer
	userAgent string
	http      *http.Client
}

// New returns a Runner that execs through rt. It does no I/O.
func New(rt ExecSyncer, cfg Config) *Runner {
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	return &Runner{
		rt:        rt,
		userAgent: "jetlet-probe/" + cfg.Version,
		http: &http.Client{
			// As kubelet's probe transport: no proxy, no connection kept
			// between probes, a container's self-signed certificate accepted.
			Transport: &http.Transport{
				Proxy:             nil,
				DisableKeepAlives: true,
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet's probes do not verify
			},
			CheckRedirect: sameHostRedirects,
		},
	}
}

// sameHostRedirects follows redirects to the same host and stops at one to
// another host, whose 3xx answer then counts as success with a warning
// (kubelet's followNonLocalRedirects=false).
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// withTimeout bounds ctx by timeout; 0 leaves it unbounded.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// truncate keeps at most maxMessage bytes of b.
func truncate(b []byte) string {
	if len(b) > maxMessage {
		b = b[:maxMessage]
	}
	return string(b)
}
