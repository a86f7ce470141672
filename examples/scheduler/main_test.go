package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// smallPod sleeps and asks for little: 200 of them fit three nodes of this
// machine.
func smallPod(name string) *corev1.Pod {
	grace := int64(0)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "86400"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("4Mi"),
				}},
			}},
		},
	}
}

func startFleet(t *testing.T, nodes map[string][]string) (*client.Client, string) {
	t.Helper()
	url := natstest.RunServer(t).ClientURL()
	for name, args := range nodes {
		jetlettest.StartNode(t, url, name, args...)
	}
	c, err := client.Connect(t.Context(), client.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, url
}

var placed = regexp.MustCompile(`^pod/default/(p\d+): (n\d)$`)

// The scheduler places 200 pods on three real `jetlet run` nodes of 67 pods
// each: every pod runs, least-allocated scoring spreads them, and none is
// refused, not even on the way: the scheduler counts the pods it placed that
// a record does not count yet (without that, a node's record a second
// behind lets it send a full node more). It logs the pods placed per second.
func TestSchedulerPlaces200PodsOnThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three jetlet runs and 200 pods")
	}
	const pods = 200
	maxPods := []string{"--max-pods", "67"}
	c, url := startFleet(t, map[string][]string{"n1": maxPods, "n2": maxPods, "n3": maxPods})
	var manifest strings.Builder
	for i := range pods {
		doc, err := yaml.Marshal(smallPod(fmt.Sprintf("p%03d", i)))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&manifest, "---\n%s", doc)
	}
	var out strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	err := run(ctx, []string{"--nats-url", url}, strings.NewReader(manifest.String()), &out)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("scheduler: %v\n%s", err, out.String())
	}
	t.Logf("placed %d pods in %s: %.1f pods/s", pods, elapsed.Round(time.Millisecond), pods/elapsed.Seconds())

	perNode := map[string]int{}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, l := range lines {
		if m := placed.FindStringSubmatch(l); m != nil {
			perNode[m[2]]++
		} else {
			t.Errorf("scheduler said %q, want pod/default/pNNN: NODE, no node refusing it", l)
		}
	}
	t.Logf("pods per node: %v", perNode)
	if len(lines) != pods {
		t.Fatalf("%d lines for %d pods", len(lines), pods)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if perNode[n] < pods/4 {
			t.Errorf("%s got %d pods of %d: least-allocated scoring spreads them (%v)", n, perNode[n], pods, perNode)
		}
	}
	// The fleet agrees: 200 pods running, none refused.
	poll.Until(t, time.Minute, poll.Msg("200 pods Running in jetlet_status"), func() bool {
		all, err := c.Pods(ctx, "")
		if err != nil {
			return false
		}
		running := 0
		for _, p := range all {
			if p.Status != nil && p.Status.Phase == schemas.PhaseRunning {
				running++
			}
		}
		return running == pods
	})
}

// A node whose record the scheduler read before another writer filled it
// (--max-pods 1) refuses the pod with OutOfpods; the scheduler places it on
// the other node, though that one scores lower.
func TestSchedulerPlacesElsewhereWhenRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two jetlet runs")
	}
	c, _ := startFleet(t, map[string][]string{"n1": {"--max-pods", "1"}, "n2": nil})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	apply := func(node string, pod *corev1.Pod) {
		t.Helper()
		in, err := c.Apply(ctx, node, pod)
		if err == nil {
			_, err = c.Wait(ctx, in, client.WaitOptions{})
		}
		if err != nil {
			t.Fatalf("%s on %s: %v", pod.Name, node, err)
		}
	}
	// n2 holds more than n1, so that n1 scores higher.
	load := smallPod("load")
	load.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	apply("n2", load)
	poll.Until(t, time.Minute, poll.Msg("n2's record to count its pod"), func() bool {
		n, err := c.GetNode(ctx, "n2")
		return err == nil && n.Record != nil && n.Record.Allocated.Cpu().MilliValue() == 500
	})
	s, err := newScheduler(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// Another writer fills n1 behind the scheduler's back; the scheduler's
	// view is not updated (no WatchNodes): its record is behind.
	apply("n1", smallPod("other"))

	node, refused, err := s.place(ctx, smallPod("p"))
	if err != nil {
		t.Fatalf("place: %v (refused: %v)", err, refused)
	}
	if want := []string{" (n1 refused: OutOfpods)"}; node != "n2" || !slices.Equal(refused, want) {
		t.Fatalf("placed on %s, refused %q; want n2 after %q", node, refused, want)
	}
	poll.Until(t, time.Minute, poll.Msg("pod p Running on n2"), func() bool {
		p, err := c.GetPod(ctx, "n2", client.PodRef{Namespace: "default", Name: "p"})
		return err == nil && p.Status != nil && p.Status.Phase == schemas.PhaseRunning
	})
}
