package bridge

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
)

// LabelBridged marks the Nodes a bridge made, for `kubectl get nodes -l`
// and for a bridge to find its own.
const LabelBridged = "jetlet.io/bridged"

// AnnotationVersion is the annotation of a bridged Node that names the
// node's jetlet release (its nodeInfo.kubeletVersion is the Kubernetes
// release jetlet follows).
const AnnotationVersion = "jetlet.io/version"

// kubeletRelease is the Kubernetes release whose kubelet jetlet follows:
// that of go.mod's k8s.io modules.
const kubeletRelease = "v1.37.2"

// nodeOf is the Node that a node record says, its kubelet API at
// kubeletAddress:kubeletPort (the bridge's; none when kubeletPort is 0).
// The spec (taints, unschedulable) counts at the Node's
// creation only: the control plane and kubectl own it after.
func nodeOf(rec *schemas.NodeRecord, kubeletPort int32, kubeletAddress string) *corev1.Node {
	labels := maps.Clone(rec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelBridged] = "true"
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        rec.Node,
			Labels:      labels,
			Annotations: map[string]string{AnnotationVersion: rec.JetletVersion},
		},
		Spec: corev1.NodeSpec{Taints: rec.Taints, Unschedulable: rec.Unschedulable},
		Status: corev1.NodeStatus{
			Capacity:    rec.Capacity,
			Allocatable: rec.Allocatable,
			Addresses:   addressesOf(rec, kubeletPort, kubeletAddress),
			Images:      rec.Images,
			DaemonEndpoints: corev1.NodeDaemonEndpoints{
				KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          kubeletRelease,
				ContainerRuntimeVersion: rec.RuntimeName + "://" + rec.RuntimeVersion,
				OperatingSystem:         rec.Labels[corev1.LabelOSStable],
				Architecture:            rec.Labels[corev1.LabelArchStable],
			},
			DeclaredFeatures: rec.DeclaredFeatures,
		},
	}
	// The API server refuses a swap capacity of 0: a machine without swap
	// says nothing.
	if rec.Swap != nil && rec.Swap.Capacity != nil && *rec.Swap.Capacity > 0 {
		n.Status.NodeInfo.Swap = rec.Swap
	}
	for _, c := range rec.Conditions {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type:               c.Type,
			Status:             c.Status,
			Reason:             c.Reason,
			Message:            c.Message,
			LastHeartbeatTime:  metav1.NewTime(rec.HeartbeatAt),
			LastTransitionTime: metav1.NewTime(c.LastTransitionTime),
		})
	}
	return n
}

// sameNode says whether two Nodes differ in nothing but their conditions'
// heartbeat times: a heartbeat alone renews the Lease, it does not rewrite
// the Node.
func sameNode(a, b *corev1.Node) bool {
	strip := func(n *corev1.Node) *corev1.Node {
		n = n.DeepCopy()
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return n
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// addressesOf are a Node's addresses: its record's, or with a kubelet API
// the bridge's as its InternalIP, the one kube-apiserver dials for logs
// and exec (it prefers a Hostname, an InternalDNS and an InternalIP, in
// that order, so the record's of those types are left out: the pods'
// hostIPs keep the node's own), then the record's external ones.
func addressesOf(rec *schemas.NodeRecord, kubeletPort int32, kubeletAddress string) []corev1.NodeAddress {
	if kubeletPort == 0 {
		return rec.Addresses
	}
	out := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: kubeletAddress}}
	for _, a := range rec.Addresses {
		if a.Type == corev1.NodeExternalIP || a.Type == corev1.NodeExternalDNS {
			out = append(out, a)
		}
	}
	return out
}
