package admission

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testNode is a node with room: 2 cpus, 4Gi of memory, 10Gi of disk, 110
// pods, labelled, untainted, under no pressure, at the baseline level.
func testNode() *Node {
	return &Node{
		Name:   "n1",
		Labels: map[string]string{"kubernetes.io/hostname": "n1", "zone": "a", "disktype": "ssd", "cores": "8"},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("2"),
			corev1.ResourceMemory:           resource.MustParse("4Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
		},
		PodSecurity: LevelBaseline,
	}
}

// testPod is a pod that passes every check on testNode, at every level of
// the Pod Security Standards: its one container runs as non-root with
// RuntimeDefault seccomp, no privilege escalation and no capabilities.
func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{restrictedContainer("c")},
		},
	}
}

func restrictedContainer(name string) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: "busybox",
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// requests sets the first container's requests, "cpu", "100m", "memory", "1Gi", ...
func requests(kv ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		list[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return list
}

// activePods are n running pods of the given requests each.
func activePods(n int, kv ...string) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = testPod(fmt.Sprintf("active-%d", i))
		pods[i].Spec.Containers[0].Resources.Requests = requests(kv...)
	}
	return pods
}

func TestAdmitAdmitsAPodThatFits(t *testing.T) {
	pod := testPod("web")
	pod.Spec.Containers[0].Resources.Requests = requests("cpu", "500m", "memory", "1Gi")
	for _, level := range []Level{LevelPrivileged, LevelBaseline, LevelRestricted} {
		node := testNode()
		node.PodSecurity = level
		if v := Admit(node, pod, NewHeld(activePods(3, "cpu", "500m", "memory", "1Gi")...)); v != admitted {
			t.Errorf("at %s: %+v, want admitted", level, v)
		}
	}
}

// TestAdmitOrder: a pod failing two checks is refused by the earlier one, in
// docs/contract.md section 12's order.
func TestAdmitOrder(t *testing.T) {
	// Each failure, applied to the node, the pod or the active pods.
	type setup func(node *Node, pod *corev1.Pod, active *[]*corev1.Pod)
	failures := []struct {
		reason string
		apply  setup
	}{
		{ReasonPodSecurity, func(node *Node, pod *corev1.Pod, _ *[]*corev1.Pod) {
			node.PodSecurity = LevelBaseline
			pod.Spec.HostPID = true
		}},
		{ReasonNodeName, func(_ *Node, pod *corev1.Pod, _ *[]*corev1.Pod) { pod.Spec.NodeName = "n2" }},
		{ReasonNodeAffinity, func(_ *Node, pod *corev1.Pod, _ *[]*corev1.Pod) {
			pod.Spec.NodeSelector = map[string]string{"zone": "b"}
		}},
		{ReasonTaintToleration, func(node *Node, _ *corev1.Pod, _ *[]*corev1.Pod) {
			node.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{ReasonNodePorts, func(node *Node, pod *corev1.Pod, active *[]*corev1.Pod) {
			// Baseline forbids host ports: only a privileged node gets this far.
			node.PodSecurity = LevelPrivileged
			pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			other := testPod("other")
			other.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			*active = append(*active, other)
		}},
		{"OutOfcpu", func(_ *Node, pod *corev1.Pod, _ *[]*corev1.Pod) {
			pod.Spec.Containers[0].Resources.Requests = requests("cpu", "3")
		}},
		{"OutOfpods", func(node *Node, _ *corev1.Pod, active *[]*corev1.Pod) {
			node.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
			*active = append(*active, testPod("one"))
		}},
		{ReasonEvicted, func(node *Node, _ *corev1.Pod, _ *[]*corev1.Pod) {
			node.Conditions = []corev1.NodeConditionType{corev1.NodeDiskPressure}
		}},
		{ReasonNodeUnschedulable, func(node *Node, _ *corev1.Pod, _ *[]*corev1.Pod) { node.Unschedulable = true }},
		{ReasonNodeShutdown, func(node *Node, _ *corev1.Pod, _ *[]*corev1.Pod) { node.ShuttingDown = true }},
	}
	for i, earlier := range failures {
		for _, later := range failures[i:] {
			t.Run(earlier.reason+"+"+later.reason, func(t *testing.T) {
				node, pod, active := testNode(), testPod("web"), []*corev1.Pod(nil)
				later.apply(node, pod, &active)
				earlier.apply(node, pod, &active)
				v := Admit(node, pod, NewHeld(active...))
				if v.Admit || v.Reason != earlier.reason {
					t.Errorf("got %+v, want refused with %s", v, earlier.reason)
				}
			})
		}
	}
}
