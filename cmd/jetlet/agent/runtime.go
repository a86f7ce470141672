package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/schemas"
)

// runtimeStatusPeriod is how often /readyz's runtime condition is refreshed.
const runtimeStatusPeriod = 5 * time.Second

// criObserver observes every CRI call: latency by method, errors by method
// (each method's counter at 0 from the start), and a failure logged at warn
// unless jetlet expects and handles it: a not-found (a container already
// gone), a method the runtime does not implement (containerd 1.6 has no
// container events: the relist does without).
func criObserver(reg prometheus.Registerer, log zerolog.Logger) func(method string, d time.Duration, err error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jetlet_runtime_call_duration_seconds",
		Help:    "CRI call latency by method.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 4, 12),
	}, []string{"method"})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jetlet_runtime_call_errors_total",
		Help: "CRI calls that returned an error, by method.",
	}, []string{"method"})
	reg.MustRegister(latency, failures)
	for _, svc := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		for _, m := range svc.Methods {
			failures.WithLabelValues(m.MethodName)
		}
		for _, s := range svc.Streams {
			failures.WithLabelValues(s.StreamName)
		}
	}
	return func(method string, d time.Duration, err error) {
		latency.WithLabelValues(method).Observe(d.Seconds())
		if err == nil {
			return
		}
		failures.WithLabelValues(method).Inc()
		if !errors.Is(err, crierr.ErrNotFound) && !errors.Is(err, crierr.ErrUnimplemented) && !errors.Is(err, crierr.ErrCanceled) {
			log.Warn().Err(err).Str("method", method).Dur("took_ms", d).Msg("CRI call failed")
		}
	}
}

// startEmbeddedRuntime starts the embedded process runtime on a socket under
// the data dir and returns its endpoint.
func (a *agent) startEmbeddedRuntime(ctx context.Context) (*embedded.Runtime, string, error) {
	sock, err := filepath.Abs(filepath.Join(a.cfg.dataDir, "cri.sock"))
	if err != nil {
		return nil, "", err
	}
	if len(sock) > 107 {
		return nil, "", fmt.Errorf("embedded runtime socket %s is %d bytes, over the 107 a unix socket allows; use a shorter --data-dir", sock, len(sock))
	}
	rt, err := embedded.New(embedded.Config{
		Dir:          filepath.Join(a.cfg.dataDir, "runtime"),
		ImageDir:     a.cfg.imageStoreDir,
		ShimPath:     a.shimPath(ctx),
		Logger:       logger,
		PodPidsLimit: a.cfg.podMaxPids,
		CNIConfDir:   a.cfg.cniConfDir,
		CNIBinDirs:   a.cfg.cniBinDirs,
		PodBridge:    a.cfg.podBridge,
		PodCIDR:      a.cfg.podCIDR,
		HiddenPaths:  a.hostSecrets(),

		HostPrograms:       a.cfg.hostPrograms,
		InsecureRegistries: a.cfg.insecureRegistries,
		ImageMirror:        a.imageMirror(),
	})
	if err != nil {
		return nil, "", err
	}
	if err := rt.Start(ctx, sock); err != nil {
		return nil, "", fmt.Errorf("embedded runtime: %w", err)
	}
	if err := a.serveImageImport(ctx, rt); err != nil {
		rt.Stop()
		return nil, "", err
	}
	endpoint := "unix://" + sock
	a.log.Info().Str("endpoint", endpoint).Msg("embedded process runtime listening (crictl --runtime-endpoint " + endpoint + ")")
	return rt, endpoint, nil
}

// hostSecrets are the host paths that would give a pod this node: the data
// dir (its NATS seed, the runtime's socket), jetlet's binary and every
// credential file a flag names. The embedded runtime hides them in
// containers, whose root is the host's tree.
func (a *agent) hostSecrets() []string {
	paths := []string{a.cfg.dataDir, a.cfg.imageCredentials,
		a.cfg.nats.Creds, a.cfg.nats.NkeySeed, a.cfg.nats.TLSKey, a.cfg.nats.TLSCert, a.cfg.nats.TLSCA}
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, exe)
	}
	return slices.DeleteFunc(paths, func(p string) bool { return p == "" })
}

// connectRuntime connects the CRI client, retrying with back-off until the
// runtime answers or ctx is done: a runtime that is still starting, or down,
// only delays readiness.
func (a *agent) connectRuntime(ctx context.Context, endpoint string, observe func(string, time.Duration, error)) (*runtime.Client, error) {
	client, err := runtime.New(runtime.Config{
		Endpoint:       endpoint,
		RequestTimeout: a.cfg.runtimeRequestTimeout,
		Logger:         logger,
		Observe:        observe,
	})
	if err != nil {
		return nil, err
	}
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(10*time.Second)), ctx)
	err = backoff.RetryNotify(func() error {
		err := client.Connect(ctx)
		if errors.Is(err, runtime.ErrUnsupportedVersion) || errors.Is(err, runtime.ErrInvalidConfig) {
			return backoff.Permanent(err)
		}
		return err
	}, b, func(err error, next time.Duration) {
		a.log.Warn().Err(err).Str("endpoint", endpoint).Dur("retry_in_ms", next).Msg("CRI runtime not answering; retrying")
	})
	if err != nil {
		return nil, err
	}
	return client, nil
}

// watchRuntime keeps /readyz's runtime condition current (the runtime must
// answer Status and report itself ready) and the node's NetworkUnavailable
// condition, the runtime's NetworkReady. The first check is done when it
// returns, so that pods are synced knowing the network's state; the next
// run in the background until ctx is done.
func watchRuntime(ctx context.Context, client *runtime.Client, healthy *atomic.Pointer[error], network *atomic.Pointer[schemas.NodeCondition]) {
	check := func() {
		callCtx, cancel := context.WithTimeout(ctx, runtimeStatusPeriod)
		defer cancel()
		var result error
		st, err := client.Status(callCtx, false)
		switch {
		case err != nil:
			result = err
		default:
			for _, c := range st.GetStatus().GetConditions() {
				switch {
				case c.Type == "RuntimeReady" && !c.Status:
					result = fmt.Errorf("runtime not ready: %s %s", c.Reason, c.Message)
				case c.Type == "NetworkReady":
					prev := network.Load()
					cond := networkCondition(c, prev, time.Now().UTC())
					if cond.Status == corev1.ConditionTrue && (prev == nil || prev.Status != cond.Status) {
						logger.Warn().Str("reason", cond.Reason).Str("message", cond.Message).Msg("the runtime's pod network is not ready: the node reports NetworkUnavailable")
					}
					network.Store(cond)
				}
			}
		}
		healthy.Store(&result)
	}
	check()
	go periodic.Every(ctx, runtimeStatusPeriod, check)
}

// podNetworkDown says whether the runtime's last Status had NetworkReady
// false.
func (a *agent) podNetworkDown() bool {
	c := a.runtimeNetwork.Load()
	return c != nil && c.Status == corev1.ConditionTrue
}

// networkCondition is the node's NetworkUnavailable for the runtime's
// NetworkReady c: kubelet turns a runtime's network not ready into Ready
// false and runs no pod but hostNetwork ones; jetlet runs them with only lo
// (the embedded runtime) and says so with the condition Kubernetes has for a
// node whose network is not set up. prev's transition time stays while the
// status does.
func networkCondition(c *runtimeapi.RuntimeCondition, prev *schemas.NodeCondition, now time.Time) *schemas.NodeCondition {
	cond := &schemas.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse,
		Reason: "RuntimeNetworkReady", Message: "the runtime reports its pod network ready", LastTransitionTime: now}
	if !c.Status {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, c.Reason, c.Message
		if cond.Reason == "" {
			cond.Reason = "NetworkPluginNotReady"
		}
	}
	if prev != nil && prev.Status == cond.Status {
		cond.LastTransitionTime = prev.LastTransitionTime
	}
	return cond
}
