package cri_test

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Benchmarks of CRI calls over the unix socket against the embedded
// runtime, through jetlet's client (so client overhead is included):
//
//	go test -run '^$' -bench . -benchtime 2000x ./test/cri
//
// calls/s is b.N over the elapsed time; Create+Start reports latency
// percentiles of one CreateContainer plus StartContainer.

func BenchmarkContainerStatus(b *testing.B) {
	be := embeddedBackend(b)
	p := newPod(b, be, nil)
	id, _ := startedContainer(b, be, p, containerSpec{script: runUntilTerm})
	waitContainerState(b, be, id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	ctx := ctxT(b)

	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := be.client.ContainerStatus(ctx, id, false); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := be.client.ContainerStatus(ctx, id, false); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
}

func BenchmarkListContainers100(b *testing.B) {
	be := embeddedBackend(b)
	const n = 100
	ids := make([]string, 0, n)
	for range 10 {
		p := newPod(b, be, nil)
		for range n / 10 {
			id, _ := startedContainer(b, be, p, containerSpec{script: runUntilTerm})
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		waitContainerState(b, be, id, runtimeapi.ContainerState_CONTAINER_RUNNING)
	}
	ctx := ctxT(b)
	filter := &runtimeapi.ContainerFilter{LabelSelector: map[string]string{runLabel: be.runID}}
	got, err := be.client.ListContainers(ctx, filter)
	if err != nil || len(got) != n {
		b.Fatalf("ListContainers = %d containers, %v; want %d", len(got), err, n)
	}

	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := be.client.ListContainers(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := be.client.ListContainers(ctx, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
}

// BenchmarkCreateStart measures CreateContainer+StartContainer, one
// container at a time, each in a sandbox holding up to 50 of them. The
// containers exit at once; they are removed with their sandboxes at the end.
func BenchmarkCreateStart(b *testing.B) {
	be := embeddedBackend(b)
	ensureImage(b, be)
	ctx := ctxT(b)
	var p *pod
	lat := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		if i%50 == 0 {
			b.StopTimer()
			p = newPod(b, be, nil)
			b.StartTimer()
		}
		i++
		start := time.Now()
		id, _ := newContainer(b, be, p, containerSpec{script: "exit 0"})
		if err := be.client.StartContainer(ctx, id); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	pct := func(q float64) float64 {
		return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "containers/s")
}
