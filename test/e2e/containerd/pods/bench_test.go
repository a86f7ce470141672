package containerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

// BenchmarkPodStart measures pod start latency on the runtime, one pod at a
// time, 50 pods (JETLET_BENCH_PODS) after one warm-up pod that is not
// counted, host network, the test image, a container that runs until
// SIGTERM. Two parts:
//
//   - cri: the bare CRI calls through jetlet's client, RunPodSandbox +
//     CreateContainer + StartContainer, timed from before the first call
//     to the return of the last;
//   - jetlet: `jetlet run --runtime-endpoint`, timed from before the intent
//     is published to the arrival of the pod's ContainerStarted event on a
//     NATS subscription (the test's clock on both ends).
//
// Run it with the set-up's environment:
//
//	source /tmp/jetlet-containerd/env.sh
//	go test -run '^$' -bench PodStart -benchtime 1x ./test/e2e/containerd/...
//
// Both run in the same benchmark, one after the other (never at once:
// jetlet deletes pods no intent wants). p50 and p99 are nearest-rank
// percentiles; over 50 pods p99 is the slowest pod. Every pod is removed
// at the end of its part.
func BenchmarkPodStart(b *testing.B) {
	pods := 50
	if v := os.Getenv("JETLET_BENCH_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("JETLET_BENCH_PODS=%q: want a positive number", v)
		}
		pods = n
	}
	needContainerd(b)
	b.Run("cri", func(b *testing.B) { benchCRI(b, pods) })
	b.Run("jetlet", func(b *testing.B) { benchJetlet(b, pods) })
}

// percentile is the nearest-rank q-quantile of sorted, in milliseconds.
func percentile(sorted []time.Duration, q float64) float64 {
	i := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return float64(sorted[i].Microseconds()) / 1000
}

func report(b *testing.B, lat []time.Duration, what string) {
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "pods")
	b.Logf("%s over %d pods: min %s p50 %.1fms p90 %.1fms p99 %.1fms max %s",
		what, len(lat), lat[0], percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), lat[len(lat)-1])
}

func benchCRI(b *testing.B, pods int) {
	s := newSuite(b)
	logRoot := shortDir(b)
	ctx := context.Background()
	parent := s.directCgroupParent(b)
	startPod := func(i int) time.Duration {
		name := fmt.Sprintf("cri-%03d-%s", i, s.runID)
		sb := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: name, Namespace: "default"},
			LogDirectory: filepath.Join(logRoot, name),
			Labels:       map[string]string{runLabel: s.runID, labelPodUID: name},
			Linux: &runtimeapi.LinuxPodSandboxConfig{
				CgroupParent: parent,
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{
						Network: runtimeapi.NamespaceMode_NODE,
						Pid:     runtimeapi.NamespaceMode_CONTAINER,
						Ipc:     runtimeapi.NamespaceMode_POD,
					},
				},
			},
		}
		cc := &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: s.env.image},
			Command:  []string{"/bin/sh", "-c", untilTerm},
			Labels:   map[string]string{runLabel: s.runID, labelPodUID: name},
			LogPath:  "app/0.log",
			Linux:    &runtimeapi.LinuxContainerConfig{},
		}
		// jetlet makes these directories too, before its CRI calls.
		if err := os.MkdirAll(filepath.Join(sb.LogDirectory, "app"), 0o755); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		sid, err := s.cri.RunPodSandbox(ctx, sb, "")
		if err != nil {
			b.Fatalf("RunPodSandbox: %v", err)
		}
		cid, err := s.cri.CreateContainer(ctx, sid, cc, sb)
		if err != nil {
			b.Fatalf("CreateContainer: %v", err)
		}
		if err := s.cri.StartContainer(ctx, cid); err != nil {
			b.Fatalf("StartContainer: %v", err)
		}
		return time.Since(start)
	}
	// Before the suite's sweep, which would report them as left behind.
	b.Cleanup(func() { s.removeRun(5 * time.Minute) })
	startPod(-1) // warm-up
	lat := make([]time.Duration, 0, pods)
	for i := range pods {
		lat = append(lat, startPod(i))
	}
	report(b, lat, "RunPodSandbox+CreateContainer+StartContainer")
}

func benchJetlet(b *testing.B, pods int) {
	s := newSuite(b)
	n := s.startNode()
	type arrival struct {
		at time.Time
		ev schemas.LifecycleEvent
	}
	started := make(chan arrival, pods+1)
	sub, err := n.nc.Subscribe("jetlet.event."+n.name+".*."+string(schemas.EventContainerStarted), func(m *nats.Msg) {
		at := time.Now()
		var ev schemas.LifecycleEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			b.Errorf("ContainerStarted event: %v", err)
			return
		}
		started <- arrival{at, ev}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := n.nc.Flush(); err != nil {
		b.Fatal(err)
	}
	startPod := func(i int) (observed, evTime time.Duration) {
		uid := s.uid(fmt.Sprintf("bench-%03d", i))
		body := s.podJSON(uid, 1, "Always", untilTerm)
		start := time.Now()
		n.publish(uid, body)
		timeout := time.After(60 * time.Second)
		for {
			select {
			case a := <-started:
				if a.ev.UID != uid {
					b.Fatalf("ContainerStarted of %s while waiting for %s", a.ev.UID, uid)
				}
				return a.at.Sub(start), a.ev.Time.Sub(start)
			case <-timeout:
				st, _ := n.status(uid)
				b.Fatalf("no ContainerStarted for %s within 60s; status %+v", uid, st)
			}
		}
	}
	startPod(-1) // warm-up
	lat := make([]time.Duration, 0, pods)
	evLat := make([]time.Duration, 0, pods)
	for i := range pods {
		o, e := startPod(i)
		lat = append(lat, o)
		evLat = append(evLat, e)
	}
	slices.Sort(evLat)
	b.Logf("by the events' own time: p50 %.1fms p99 %.1fms", percentile(evLat, 0.50), percentile(evLat, 0.99))
	report(b, lat, "intent published to ContainerStarted received")
}
