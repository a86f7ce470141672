package e2e_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/procstat"
)

// BenchmarkProbesCPU measures the CPU a jetlet spends on probes: 100 running
// pods each with 3 probes at periodSeconds 1 (liveness exec `true`,
// readiness httpGet and startup tcpSocket, both against a server in the
// test process; a third run has a tcpSocket liveness probe instead of exec,
// to tell the cost of exec apart), against the same pods without probes,
// over a fixed span
// (JETLET_PROBE_BENCH_SPAN, default 30s) from when every pod is ready:
//
//	go test -run '^$' -bench BenchmarkProbesCPU -benchtime 1x ./test/e2e
//
// It reports the jetlet process's own CPU (user+system, /proc/<pid>/stat) as
// a percentage of one core, and that of its reaped children (the exec
// probes' commands run by the embedded runtime). The difference between the
// two sub-benchmarks is the probers' cost.
func BenchmarkProbesCPU(b *testing.B) {
	span := 30 * time.Second
	if v := os.Getenv("JETLET_PROBE_BENCH_SPAN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		span = d
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	exec := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(port)}}
	for _, bc := range []struct {
		name     string
		liveness *corev1.ProbeHandler // nil: no probes at all
	}{
		{"without-probes", nil},
		{"with-3-probes", &exec},
		{"with-3-probes-liveness-tcp", &tcp},
	} {
		withProbes := bc.liveness != nil
		b.Run(bc.name, func(b *testing.B) {
			n := startNode(b, shortDir(b), "")
			for i := range 100 {
				uid := fmt.Sprintf("probed-%03d", i)
				c := corev1.Container{Name: "app", Command: []string{"/bin/sh", "-c", "exec sleep 3600"}}
				if withProbes {
					c.LivenessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: *bc.liveness}
					c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
						ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: "/"}}}
					c.StartupProbe = &corev1.Probe{PeriodSeconds: 1,
						ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(port)}}}
				}
				n.publish(uid, probePodJSON(b, uid, 1, c))
			}
			poll.Until(b, 5*time.Minute, poll.Msg("100 ready pods"), func() bool {
				for i := range 100 {
					st, ok := n.status(fmt.Sprintf("probed-%03d", i))
					if !ok || st.Phase != schemas.PhaseRunning || !st.Containers[0].Ready {
						return false
					}
				}
				return true
			})
			syncs0 := metric(b, n, "jetlet_sync_duration_seconds_count")
			self0, children0 := procstat.CPU(b, n.proc.Pid())
			start := time.Now()
			b.ResetTimer()
			time.Sleep(span) // the measured span: jetlet runs on its own
			b.StopTimer()
			self1, children1 := procstat.CPU(b, n.proc.Pid())
			elapsed := time.Since(start)
			b.ReportMetric(100*float64(self1-self0)/float64(elapsed), "%core-jetlet")
			b.ReportMetric((metric(b, n, "jetlet_sync_duration_seconds_count")-syncs0)/elapsed.Seconds(), "syncs/s")
			b.ReportMetric(100*float64(children1-children0)/float64(elapsed), "%core-children")
		})
	}
}

// metricsText reads jetlet's /metrics.
func metricsText(b *testing.B, n *node) string {
	b.Helper()
	resp, err := http.Get(n.proc.HTTPAddr() + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// metric sums the samples of name (over its labels) in jetlet's /metrics.
func metric(b *testing.B, n *node, name string) float64 {
	b.Helper()
	sum, found := 0.0, false
	for _, line := range strings.Split(metricsText(b, n), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			b.Fatal(err)
		}
		sum, found = sum+f, true
	}
	if !found {
		b.Fatalf("/metrics has no %s", name)
	}
	return sum
}
