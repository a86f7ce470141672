package containerd_test

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// A `jetlet run` driving containerd measures its pods through containerd's
// ListPodSandboxStats and ListContainerStats: the stats endpoint's Summary
// has a busy pod's container with a CPU rate (from two of containerd's
// samples) and a working set, its pod its sandbox's figures where
// containerd gives them, and the node record its usage.
func TestStatsOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("busy")
	n.applyRunning(uid, s.podJSON(uid, 1, "Always", "while :; do :; done"))
	subject := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.NodeService(n.name, schemas.EndpointStats)
	// podStats is the busy pod's stats in one Summary of the node, or nil.
	podStats := func() *statsapi.PodStats {
		msg, err := n.nc.Request(subject, nil, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var summary statsapi.Summary
		if err := json.Unmarshal(msg.Data, &summary); err != nil {
			t.Fatalf("%v: %s", err, msg.Data)
		}
		for i := range summary.Pods {
			if p := &summary.Pods[i]; p.PodRef.UID == uid && len(p.Containers) == 1 {
				return p
			}
		}
		return nil
	}
	var pod *statsapi.PodStats
	poll.Until(t, 60*time.Second, poll.Msg("the busy pod's CPU rate in the node's Summary"), func() bool {
		if pod = podStats(); pod == nil {
			return false
		}
		c := pod.Containers[0].CPU
		return c != nil && c.UsageNanoCores != nil && *c.UsageNanoCores > 0
	})
	c := pod.Containers[0]
	if c.Name != "app" || c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 || pod.PodRef.Name != "p-"+uid {
		t.Errorf("the busy pod's stats: %+v, container %+v", pod.PodRef, c)
	}
	// A containerd without sandbox stats leaves the pod's own figures out.
	// The pod's and the container's come from two calls, in either order:
	// the pod's CPU time of a later Summary is at least the container's of
	// this one.
	if later := podStats(); later == nil || later.CPU != nil && (later.CPU.UsageCoreNanoSeconds == nil || *later.CPU.UsageCoreNanoSeconds < *c.CPU.UsageCoreNanoSeconds) {
		t.Errorf("the pod's CPU %+v: not its sandbox's (at least its container's, %d ns, of an earlier Summary)", later, *c.CPU.UsageCoreNanoSeconds)
	}
	t.Logf("the busy pod's container: %d nanocores, working set %d; the pod's CPU %+v", *c.CPU.UsageNanoCores, *c.Memory.WorkingSetBytes, pod.CPU)
	n.waitRecord(t, "the node record's usage", func(rec schemas.NodeRecord) bool {
		_, cpu := rec.Usage[corev1.ResourceCPU]
		_, memory := rec.Usage[corev1.ResourceMemory]
		return cpu && memory
	})
}
