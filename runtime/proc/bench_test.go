package proc

import (
	"fmt"
	"sort"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Figures for the closing note: CRI calls per second over the socket
// and container Create+Start latency. Run with
//
//	go test -run '^$' -bench . ./runtime/proc

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

func BenchmarkCreateStart(b *testing.B) {
	h := newHarness(b)
	sb, _ := h.pod("p", nil)
	ctx := ctxT(b)
	if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: testImage}}); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		resp, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig(fmt.Sprintf("c%d", i), nil, "sleep", "1000")})
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
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
