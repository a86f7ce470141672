package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/eviction"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// statsless is a runtime the test's own observer asks nothing: it measures
// the node's memory only, as jetlet's observer does.
type statsless struct{}

var errNoStats = errors.New("the test's observer reads the host only")

func (statsless) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, errNoStats
}

func (statsless) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, errNoStats
}

func (statsless) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return nil, errNoStats
}

// Node-pressure eviction through `jetlet run`: with memory.available's hard
// threshold 2.5 GiB below what the machine has free, a pod that takes 4 GiB
// is evicted (Failed, Evicted, the signal in its message; its containers
// killed with reason Evicted), and the node's MemoryPressure is shown in its
// record, then cleared once the transition period has passed.
func TestEvictionUnderMemoryPressure(t *testing.T) {
	observer, err := eviction.NewNodeObserver(statsless{}, eviction.NodeObserverConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observer.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	available := obs.Signals[eviction.SignalMemoryAvailable].Available
	threshold := resource.NewQuantity(available.Value()-5<<29, resource.BinarySI)
	t.Logf("memory.available %s: threshold %s", available.String(), threshold.String())
	n := startNode(t, shortDir(t), "", "--eviction-hard", "memory.available<"+threshold.String(),
		"--eviction-pressure-transition-period", "5s")

	// Two dd buffers of 2000 MiB each, filled and held while dd blocks
	// writing to a pipe nobody reads.
	hog := "dd if=/dev/zero bs=2000M count=1 | sleep 3600 & dd if=/dev/zero bs=2000M count=1 | sleep 3600"
	n.publish("hog", podJSON("hog", 1, "Always", hog))
	if r := n.results("hog", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("hog: %s %s", r.Outcome, r.Error)
	}
	pressured := n.waitRecord(t, 90*time.Second, func(rec schemas.NodeRecord) bool { return hasCondition(rec, corev1.NodeMemoryPressure) })
	t.Logf("node record under pressure: %+v", pressured.Conditions)
	st := n.waitStatus("hog", 90*time.Second, func(st *schemas.PodStatus) bool { return st.Reason == schemas.ReasonEvicted })
	if st.Phase != schemas.PhaseFailed || !strings.Contains(st.Message, "The node was low on resource: memory.") {
		t.Errorf("hog's status: %s, %s, %q; want Failed, Evicted, a message naming memory", st.Phase, st.Reason, st.Message)
	}
	t.Logf("hog evicted: %s", st.Message)
	n.waitEvent("hog", schemas.EventContainerKilled, 30*time.Second, func(ev schemas.LifecycleEvent) bool { return ev.Reason == schemas.ReasonEvicted })
	cleared := n.waitRecord(t, 90*time.Second, func(rec schemas.NodeRecord) bool { return !hasCondition(rec, corev1.NodeMemoryPressure) })
	t.Logf("node record once cleared: %+v", cleared.Conditions)
	// Evicted for good: no intent asked for it again, so nothing restarts it.
	if st, _ := n.status("hog"); st.Phase != schemas.PhaseFailed {
		t.Errorf("hog restarted after its eviction: %+v", st)
	}
}

// hasCondition reports whether the record says the condition is True.
func hasCondition(rec schemas.NodeRecord, typ corev1.NodeConditionType) bool {
	return slices.ContainsFunc(rec.Conditions, func(c schemas.NodeCondition) bool {
		return c.Type == typ && c.Status == corev1.ConditionTrue
	})
}

// waitRecord waits until the node's record in jetlet_nodes satisfies ok.
func (n *node) waitRecord(t *testing.T, timeout time.Duration, ok func(schemas.NodeRecord) bool) schemas.NodeRecord {
	t.Helper()
	kv, err := n.js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	var rec schemas.NodeRecord
	poll.Until(t, timeout, func() string { return "the node record to match; last: " + string(mustJSON(rec)) }, func() bool {
		e, err := kv.Get(t.Context(), n.name)
		return err == nil && json.Unmarshal(e.Value(), &rec) == nil && ok(rec)
	})
	return rec
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
