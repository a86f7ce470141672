package bridge_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/procstat"
)

// BenchmarkPodStartThroughADeployment measures pod start as Kubernetes
// sees it: a Deployment of 100 replicas over two jetlet nodes, each pod
// from its creation to Running, both as a watch of the API server sees
// them (p50, p99, max), and what the bridge cost meanwhile: its CPU and
// the growth of its resident memory per 100 pods, then its CPU per node
// per minute at rest with the pods running. The pods have no service
// account token, then the default one (a TokenRequest and a sealed Secret
// each). Run it without -race: the bridge is built as the test is.
func BenchmarkPodStartThroughADeployment(b *testing.B) {
	f := startFleet(b, "n1", "n2")
	for _, name := range []string{"n1", "n2"} {
		f.schedulable(b, name)
	}
	b.Run("no-token", func(b *testing.B) { f.benchmarkPodStart(b, false) })
	b.Run("token", func(b *testing.B) { f.benchmarkPodStart(b, true) })
}

func (f *fleet) benchmarkPodStart(b *testing.B, token bool) {
	const replicas = 100
	ctx := b.Context()
	pid := f.bridge.Pid()
	for range b.N {
		w, err := f.cp.Client.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			b.Fatal(err)
		}
		cpu0, _ := procstat.CPU(b, pid)
		rss0 := procstat.RSS(b, pid)
		d := deployment("web", replicas)
		d.Spec.Template.Spec.TopologySpreadConstraints = nil // the scheduler's own spreading
		if token {
			d.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}
		if _, err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		created, running := map[types.UID]time.Time{}, map[types.UID]time.Time{}
		deadline := time.After(5 * time.Minute)
		for len(running) < replicas {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					b.Fatal("the watch of web's pods ended")
				}
				p, isPod := e.Object.(*corev1.Pod)
				if !isPod || e.Type == watch.Deleted {
					continue
				}
				now := time.Now()
				if _, seen := created[p.UID]; !seen {
					created[p.UID] = now
				}
				if _, seen := running[p.UID]; !seen && p.Status.Phase == corev1.PodRunning {
					running[p.UID] = now
				}
			case <-deadline:
				b.Fatalf("%d of %d pods Running after 5 minutes", len(running), replicas)
			}
		}
		w.Stop()
		cpu1, _ := procstat.CPU(b, pid)
		rss1 := procstat.RSS(b, pid)
		var starts []time.Duration
		for uid, at := range running {
			starts = append(starts, at.Sub(created[uid]))
		}
		slices.Sort(starts)
		quantile := func(q float64) time.Duration { return starts[int(q*float64(len(starts)-1))] }
		b.ReportMetric(quantile(0.5).Seconds(), "p50-s")
		b.ReportMetric(quantile(0.99).Seconds(), "p99-s")
		b.ReportMetric(starts[len(starts)-1].Seconds(), "max-s")
		b.ReportMetric((cpu1 - cpu0).Seconds(), "bridge-cpu-s/100pods")
		b.ReportMetric(float64(rss1-rss0)/(1<<20), "bridge-rss-growth-MiB/100pods")
		b.ReportMetric(float64(rss1)/(1<<20), "bridge-rss-MiB")

		// At rest: heartbeats, leases, statuses of running pods.
		const rest = 30 * time.Second
		cpu2, _ := procstat.CPU(b, pid)
		time.Sleep(rest) // a measuring window, not a synchronisation
		cpu3, _ := procstat.CPU(b, pid)
		b.ReportMetric((cpu3-cpu2).Seconds()/2/rest.Minutes(), "bridge-cpu-s/node/min-at-rest")

		if err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		poll.Until(b, 3*time.Minute, func() string { return fmt.Sprintf("web's %d pods gone", len(f.pods(b, "app=web"))) }, func() bool {
			return len(f.pods(b, "app=web")) == 0
		})
		// A pod leaves the API server once its containers have stopped; its
		// node still tears its sandbox down. The next run starts on idle
		// nodes, or it pays for this one's teardown.
		for name := range f.nodes {
			var left int
			poll.Until(b, 3*time.Minute, func() string { return fmt.Sprintf("node %s without pods (%d left)", name, left) }, func() bool {
				s, err := f.jetlet.Stats(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				left = len(s.Pods)
				return left == 0
			})
		}
	}
}
