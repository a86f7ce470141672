package admission

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// SameResources says what equality.Semantic.DeepEqual says of two
// containers' resources.
func TestSameResourcesIsSemanticEquality(t *testing.T) {
	q := resource.MustParse
	rows := []struct {
		name string
		a, b corev1.ResourceRequirements
	}{
		{"both empty", corev1.ResourceRequirements{}, corev1.ResourceRequirements{}},
		{"nil and empty lists", corev1.ResourceRequirements{Limits: corev1.ResourceList{}}, corev1.ResourceRequirements{}},
		{"equal by value", corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1024Mi")}}},
		{"another amount", corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi")}},
			corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1G")}}},
		{"request or limit", corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1")}},
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("1")}}},
		{"another resource", corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": q("1")}},
			corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("1")}}},
		{"claims", corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}, corev1.ResourceRequirements{}},
	}
	for _, row := range rows {
		if got, want := SameResources(row.a, row.b), equality.Semantic.DeepEqual(row.a, row.b); got != want {
			t.Errorf("%s: SameResources %v, Semantic.DeepEqual %v", row.name, got, want)
		}
	}
}

// Held, kept through pods set, changed and unset, says what Allocated of
// the pods still active says, and frees their host ports.
func TestHeldIsWhatAWalkOfTheActivePodsSums(t *testing.T) {
	pods := map[string]*corev1.Pod{}
	held := NewHeld()
	check := func(step string) {
		t.Helper()
		var active []*corev1.Pod
		for _, p := range pods {
			active = append(active, p)
		}
		kept, walked := held.Allocated(), Allocated(active)
		same := len(kept) == len(walked)
		for name, q := range walked {
			k, ok := kept[name]
			same = same && ok && k.Cmp(q) == 0
		}
		if !same {
			t.Errorf("after %s: kept %v, a walk %v", step, kept, walked)
		}
	}
	set := func(step string, pod *corev1.Pod) {
		t.Helper()
		pods[pod.Name] = pod
		held.Set(pod)
		check(step)
	}
	unset := func(step, name string) {
		t.Helper()
		held.Unset(types.UID("uid-" + name))
		delete(pods, name)
		check(step)
	}
	withPort := func(pod *corev1.Pod, port int32) *corev1.Pod {
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}
		return pod
	}
	for i, kv := range [][]string{{"cpu", "100m"}, {"cpu", "200m", "memory", "1Gi"}, {"example.com/gpu", "1"}, {"cpu", "0"}} {
		pod := testPod(fmt.Sprintf("p%d", i))
		pod.Spec.Containers[0].Resources.Requests = requests(kv...)
		set("set "+pod.Name, withPort(pod, int32(8080+i)))
	}
	resized := pods["p1"].DeepCopy()
	resized.Spec.Containers[0].Resources.Requests = requests("cpu", "500m", "memory", "512Mi")
	set("p1 resized", resized)
	same := pods["p0"].DeepCopy()
	set("p0 again, unchanged", same)
	overhead := pods["p0"].DeepCopy()
	overhead.Spec.Overhead = requests("memory", "64Mi")
	set("p0 with overhead", overhead)
	unset("p2 unset, the last to request gpus", "p2")
	unset("p3 unset, the last to request cpu 0", "p3")
	unset("p0 unset", "p0")
	unset("an unknown pod unset", "nobody")

	again := withPort(testPod("again"), 8081)
	if v := checkHostPorts(testNode(), again, held); v.Reason != ReasonNodePorts {
		t.Errorf("port 8081 of p1: %+v, want refused", v)
	}
	unset("p1 unset", "p1")
	if v := checkHostPorts(testNode(), again, held); !v.Admit {
		t.Errorf("port 8081 freed: %+v, want admitted", v)
	}
}
