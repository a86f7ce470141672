package embedded

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/test/cnitest"
)

// Figures for the closing note: CRI calls per second over the socket
// and container Create+Start latency. Run with
//
//	go test -run '^$' -bench . ./runtime/embedded

func BenchmarkContainerStatus(b *testing.B) {
	h := newHarness(b)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sleep", "1000")
	ctx := ctxT(b)
	req := &runtimeapi.ContainerStatusRequest{ContainerId: id}
	start := time.Now()
	n := 0
	for b.Loop() {
		if _, err := h.rs.ContainerStatus(ctx, req); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "calls/s")
}

func BenchmarkListContainers100(b *testing.B) {
	h := newHarness(b)
	sb, sbCfg := h.pod("p", nil)
	for i := range 100 {
		h.create(sb, sbCfg, containerConfig(fmt.Sprintf("c%d", i), map[string]string{"i": fmt.Sprint(i)}, "true"))
	}
	ctx := ctxT(b)
	start := time.Now()
	n := 0
	for b.Loop() {
		resp, err := h.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err != nil || len(resp.GetContainers()) != 100 {
			b.Fatalf("%d containers, %v", len(resp.GetContainers()), err)
		}
		n++
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "calls/s")
}

// BenchmarkCreateStart times a container's create and start, in a pod on
// the host's users and in a pod with a user namespace of its own (idmapped
// layers and volumes, nsenter, a pivot in the pod's namespace).
func BenchmarkCreateStart(b *testing.B) {
	h := newHarness(b)
	ctx := ctxT(b)
	if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: testImage}}); err != nil {
		b.Fatal(err)
	}
	for _, userns := range []bool{false, true} {
		name := "host users"
		if userns {
			name = "user namespace"
		}
		b.Run(name, func(b *testing.B) {
			sb, sbCfg := h.pod("p-"+strings.ReplaceAll(name, " ", "-"), nil)
			if userns {
				if h.rt.usernsOff != nil {
					b.Skip(h.rt.usernsOff)
				}
				sb, sbCfg = h.usernsPod("p-userns", testUsernsBase)
			}
			var lat []time.Duration
			i := 0
			for b.Loop() {
				cfg := containerConfig(fmt.Sprintf("c%d", i), nil, "sleep", "1000")
				inPodUserns(cfg, sbCfg)
				t0 := time.Now()
				resp, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.GetContainerId()}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				i++
				b.StopTimer()
				if _, err := h.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: resp.GetContainerId()}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(percentileMs(lat, 0.50), "p50-ms")
			b.ReportMetric(percentileMs(lat, 0.99), "p99-ms")
		})
	}
}

// BenchmarkRunPodSandbox times a pod's start on the host's network: its
// shim, with a pid namespace its containers share (the CRI's default, a
// pod with shareProcessNamespace) and with one of their own each
// (kubelet's default), and, apart, its stop.
func BenchmarkRunPodSandbox(b *testing.B) {
	h := newHarness(b)
	ctx := ctxT(b)
	for _, mode := range []runtimeapi.NamespaceMode{runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER} {
		b.Run(strings.ToLower(mode.String())+" pids", func(b *testing.B) {
			var run, stop []time.Duration
			i := 0
			for b.Loop() {
				cfg := podConfig(fmt.Sprintf("p-%s-%d", strings.ToLower(mode.String()), i), nil)
				cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Pid: mode},
				}}
				t0 := time.Now()
				resp, err := h.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
				if err != nil {
					b.Fatal(err)
				}
				run = append(run, time.Since(t0))
				i++
				b.StopTimer()
				t1 := time.Now()
				if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: resp.GetPodSandboxId()}); err != nil {
					b.Fatal(err)
				}
				stop = append(stop, time.Since(t1))
				if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: resp.GetPodSandboxId()}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(percentileMs(run, 0.50), "run-p50-ms")
			b.ReportMetric(percentileMs(run, 0.99), "run-p99-ms")
			b.ReportMetric(percentileMs(stop, 0.50), "stop-p50-ms")
		})
	}
}

// BenchmarkRunPodSandboxCNI is what a pod's own network costs: a namespace
// and the attachment, then, apart, the StopPodSandbox that detaches it. cni
// is a bridge + host-local network through the plugins (two plugin runs);
// default the runtime's own node-local bridge, attached in process
// (network.Local: the same bridge and address store, no plugin run); lo a
// namespace with only lo (no plugin usable); host no namespace (hostNetwork).
func BenchmarkRunPodSandboxCNI(b *testing.B) {
	b.Run("net=cni", func(b *testing.B) {
		h, _ := cniHarness(b)
		benchRunPodSandbox(b, h, nil)
	})
	b.Run("net=default", func(b *testing.B) {
		cnitest.Require(b)
		benchRunPodSandbox(b, newHarness(b), nil)
	})
	b.Run("net=lo", func(b *testing.B) {
		cnitest.Require(b)
		empty := b.TempDir()
		benchRunPodSandbox(b, newHarnessWith(b, func(c *Config) { c.CNIBinDirs = []string{empty} }), nil)
	})
	b.Run("net=host", func(b *testing.B) {
		benchRunPodSandbox(b, newHarness(b), &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}})
	})
}

func benchRunPodSandbox(b *testing.B, h *harness, linux *runtimeapi.LinuxPodSandboxConfig) {
	ctx := ctxT(b)
	var run, stop []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		cfg := podConfig(fmt.Sprintf("p%d", i), nil)
		cfg.Linux = linux
		resp, err := h.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		run = append(run, time.Since(t0))
		i++
		b.StopTimer()
		t1 := time.Now()
		if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: resp.GetPodSandboxId()}); err != nil {
			b.Fatal(err)
		}
		stop = append(stop, time.Since(t1))
		if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: resp.GetPodSandboxId()}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(percentileMs(run, 0.50), "run-p50-ms")
	b.ReportMetric(percentileMs(run, 0.99), "run-p99-ms")
	b.ReportMetric(percentileMs(stop, 0.50), "stop-p50-ms")
}

// percentileMs is the p-th percentile of lat in milliseconds; it sorts lat.
func percentileMs(lat []time.Duration, p float64) float64 {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
}
