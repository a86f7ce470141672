package bridge

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/schemas"
)

func TestNodeOf(t *testing.T) {
	beat := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	base := func() *schemas.NodeRecord {
		return &schemas.NodeRecord{
			Node: "n1", JetletVersion: "v1.2.3", RuntimeName: "jetlet-embedded", RuntimeVersion: "0.1",
			Labels:      map[string]string{corev1.LabelHostname: "n1", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
			Taints:      []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")},
			Conditions:  []schemas.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: beat.Add(-time.Hour)}},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			HeartbeatAt: beat,
		}
	}
	swap := func(n int64) *corev1.NodeSwapStatus { return &corev1.NodeSwapStatus{Capacity: &n} }
	tests := []struct {
		name  string
		edit  func(*schemas.NodeRecord)
		check func(*testing.T, *corev1.Node)
	}{
		{"mapped", func(*schemas.NodeRecord) {}, func(t *testing.T, n *corev1.Node) {
			if n.Name != "n1" || n.Labels[LabelBridged] != "true" || n.Labels[corev1.LabelHostname] != "n1" || n.Annotations[AnnotationVersion] != "v1.2.3" {
				t.Errorf("meta %+v", n.ObjectMeta)
			}
			if len(n.Spec.Taints) != 1 || n.Status.Allocatable.Cpu().MilliValue() != 1900 || n.Status.Capacity.Cpu().Value() != 2 {
				t.Errorf("taints %v allocatable %v capacity %v", n.Spec.Taints, n.Status.Allocatable, n.Status.Capacity)
			}
			c := n.Status.Conditions[0]
			if c.Type != corev1.NodeReady || c.Status != corev1.ConditionTrue || !c.LastHeartbeatTime.Time.Equal(beat) || !c.LastTransitionTime.Time.Equal(beat.Add(-time.Hour)) {
				t.Errorf("condition %+v", c)
			}
			info := n.Status.NodeInfo
			if info.OperatingSystem != "linux" || info.Architecture != "amd64" || info.ContainerRuntimeVersion != "jetlet-embedded://0.1" || info.KubeletVersion != kubeletRelease {
				t.Errorf("node info %+v", info)
			}
			if n.Status.Addresses[0].Address != "10.0.0.1" {
				t.Errorf("endpoints %+v addresses %v", n.Status.DaemonEndpoints, n.Status.Addresses)
			}
		}},
		{"no swap says nothing", func(r *schemas.NodeRecord) { r.Swap = swap(0) }, func(t *testing.T, n *corev1.Node) {
			if n.Status.NodeInfo.Swap != nil {
				t.Errorf("swap %+v, want none", n.Status.NodeInfo.Swap)
			}
		}},
		{"swap", func(r *schemas.NodeRecord) { r.Swap = swap(1 << 30) }, func(t *testing.T, n *corev1.Node) {
			if s := n.Status.NodeInfo.Swap; s == nil || *s.Capacity != 1<<30 {
				t.Errorf("swap %+v, want 1Gi", s)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := base()
			tt.edit(rec)
			tt.check(t, nodeOf(rec, 0, ""))
		})
	}
}

// A heartbeat alone does not rewrite the Node; any other change does.
func TestSameNode(t *testing.T) {
	rec := &schemas.NodeRecord{Node: "n1", HeartbeatAt: time.Unix(100, 0),
		Conditions: []schemas.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	a := nodeOf(rec, 0, "")
	rec.HeartbeatAt = rec.HeartbeatAt.Add(10 * time.Second)
	if b := nodeOf(rec, 0, ""); !sameNode(a, b) {
		t.Error("a later heartbeat changed the Node")
	}
	rec.Conditions[0].Status = corev1.ConditionFalse
	if b := nodeOf(rec, 0, ""); sameNode(a, b) {
		t.Error("Ready False did not change the Node")
	}
}

// With the bridge's kubelet API, the Node's InternalIP is the bridge's
// (kube-apiserver dials it) and no record address kube-apiserver would
// prefer to it is left; the external ones stay.
func TestAddressesOf(t *testing.T) {
	rec := &schemas.NodeRecord{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
	}}
	if got := addressesOf(rec, 0, ""); len(got) != 3 {
		t.Errorf("without a kubelet API: %v, want the record's", got)
	}
	got := addressesOf(rec, 10250, "192.0.2.7")
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.7"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.9"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("with the kubelet API at 192.0.2.7: %v, want %v", got, want)
	}
	n := nodeOf(&schemas.NodeRecord{Node: "n1"}, 10250, "192.0.2.7")
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("daemon endpoints %+v, want the kubelet API's port", n.Status.DaemonEndpoints)
	}
}
