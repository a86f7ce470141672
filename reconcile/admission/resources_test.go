package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestResources(t *testing.T) {
	const prefix = "Node didn't have enough resource: "
	container := func(name string, kv ...string) corev1.Container {
		c := restrictedContainer(name)
		c.Resources.Requests = requests(kv...)
		return c
	}
	sidecar := func(name string, kv ...string) corev1.Container {
		c := container(name, kv...)
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		return c
	}
	// testNode has 2 cpus, 4Gi of memory and 10Gi of ephemeral storage.
	tests := []struct {
		name        string
		mutate      func(pod *corev1.Pod)
		allocatable corev1.ResourceList // added to testNode's
		active      []*corev1.Pod
		reason      string
		message     string // after prefix; "" is admitted
	}{
		{
			name:   "no requests",
			mutate: func(pod *corev1.Pod) {},
			active: activePods(4, "cpu", "500m"),
		},
		{
			name:   "cpu, exactly what is left",
			mutate: func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("cpu", "500m") },
			active: activePods(3, "cpu", "500m"),
		},
		{
			name:    "cpu, a millicore more, in millicores",
			mutate:  func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("cpu", "501m") },
			active:  activePods(3, "cpu", "500m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 501, used: 1500, capacity: 2000",
		},
		{
			name:    "memory, in bytes",
			mutate:  func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("memory", "2Gi") },
			active:  activePods(3, "memory", "1Gi"),
			reason:  "OutOfmemory",
			message: "memory, requested: 2147483648, used: 3221225472, capacity: 4294967296",
		},
		{
			name: "ephemeral-storage",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("ephemeral-storage", "11Gi")
			},
			reason:  "OutOfephemeral-storage",
			message: "ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240",
		},
		{
			name: "cpu before memory",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "3", "memory", "5Gi")
			},
			reason:  "OutOfcpu",
			message: "cpu, requested: 3000, used: 0, capacity: 2000",
		},
		{
			name: "an init container larger than the app containers",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "100m")
				pod.Spec.Containers = append(pod.Spec.Containers, container("c2", "cpu", "100m"))
				pod.Spec.InitContainers = []corev1.Container{container("init", "cpu", "1500m")}
			},
			active:  activePods(1, "cpu", "600m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 1500, used: 600, capacity: 2000",
		},
		{
			name: "an init container smaller than the app containers",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "1")
				pod.Spec.Containers = append(pod.Spec.Containers, container("c2", "cpu", "600m"))
				pod.Spec.InitContainers = []corev1.Container{container("init", "cpu", "1")}
			},
			active:  activePods(1, "cpu", "600m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 1600, used: 600, capacity: 2000",
		},
		{
			name: "a sidecar adds to the app containers",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "1")
				pod.Spec.InitContainers = []corev1.Container{sidecar("proxy", "cpu", "500m")}
			},
			active:  activePods(1, "cpu", "600m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 1500, used: 600, capacity: 2000",
		},
		{
			name: "an init container after a sidecar runs beside it",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "1")
				pod.Spec.InitContainers = []corev1.Container{
					sidecar("proxy", "cpu", "500m"),
					container("migrate", "cpu", "1400m"),
				}
			},
			active:  activePods(1, "cpu", "600m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 1900, used: 600, capacity: 2000",
		},
		{
			name: "the pod overhead",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("memory", "1Gi")
				pod.Spec.Overhead = requests("memory", "128Mi")
			},
			active:  activePods(3, "memory", "1Gi"),
			reason:  "OutOfmemory",
			message: "memory, requested: 1207959552, used: 3221225472, capacity: 4294967296",
		},
		{
			name: "pod-level requests",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "100m")
				pod.Spec.Resources = &corev1.ResourceRequirements{Requests: requests("cpu", "1500m")}
			},
			active:  activePods(1, "cpu", "600m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 1500, used: 600, capacity: 2000",
		},
		{
			// PodRequests: the pod level only for what it sets.
			name: "pod-level memory beside the containers' cpu",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "1500m", "memory", "1Mi")
				pod.Spec.Resources = &corev1.ResourceRequirements{Requests: requests("memory", "1Gi")}
			},
			active:  activePods(1, "cpu", "600m"),
			reason:  "OutOfcpu",
			message: "cpu, requested: 1500, used: 600, capacity: 2000",
		},
		{
			name:        "an extended resource, fitting",
			mutate:      func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("example.com/gpu", "1") },
			allocatable: requests("example.com/gpu", "2"),
			active:      activePods(1, "example.com/gpu", "1"),
		},
		{
			name:        "an extended resource, not fitting",
			mutate:      func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("example.com/gpu", "2") },
			allocatable: requests("example.com/gpu", "2"),
			active:      activePods(1, "example.com/gpu", "1"),
			reason:      "OutOfexample.com/gpu",
			message:     "example.com/gpu, requested: 2, used: 1, capacity: 2",
		},
		{
			name:    "an extended resource the node lacks",
			mutate:  func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("example.com/fpga", "1") },
			reason:  "OutOfexample.com/fpga",
			message: "example.com/fpga, requested: 1, used: 0, capacity: 0",
		},
		{
			name:    "hugepages the node lacks",
			mutate:  func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("hugepages-2Mi", "4Mi") },
			reason:  "OutOfhugepages-2Mi",
			message: "hugepages-2Mi, requested: 4194304, used: 0, capacity: 0",
		},
		{
			name: "the others by name, after memory",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("memory", "1Gi", "example.com/b", "1", "example.com/a", "1")
			},
			reason:  "OutOfexample.com/a",
			message: "example.com/a, requested: 1, used: 0, capacity: 0",
		},
		{
			name:   "a request of zero asks for nothing",
			mutate: func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("example.com/fpga", "0") },
		},
		{
			name:   "the active pods hold their init containers' requests",
			mutate: func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("cpu", "600m") },
			active: func() []*corev1.Pod {
				pods := activePods(1, "cpu", "100m")
				pods[0].Spec.InitContainers = []corev1.Container{container("init", "cpu", "1500m")}
				return pods
			}(),
			reason:  "OutOfcpu",
			message: "cpu, requested: 600, used: 1500, capacity: 2000",
		},
	}
	for _, tt := range tests {
		node := testNode()
		for name, q := range tt.allocatable {
			node.Allocatable[name] = q
		}
		pod := testPod("web")
		tt.mutate(pod)
		message := tt.message
		if message != "" {
			message = prefix + message
		}
		assertVerdict(t, tt.name, checkResources(node, pod, NewHeld(tt.active...)), tt.reason, message)
	}
}

func TestPodCount(t *testing.T) {
	tests := []struct {
		name    string
		pods    string // allocatable pods; "" is none
		active  int
		message string
	}{
		{name: "the last room", pods: "110", active: 109},
		{name: "full", pods: "110", active: 110, message: "Node didn't have enough resource: pods, requested: 1, used: 110, capacity: 110"},
		{name: "no pods allocatable", active: 0, message: "Node didn't have enough resource: pods, requested: 1, used: 0, capacity: 0"},
	}
	for _, tt := range tests {
		node := testNode()
		delete(node.Allocatable, corev1.ResourcePods)
		if tt.pods != "" {
			node.Allocatable[corev1.ResourcePods] = resource.MustParse(tt.pods)
		}
		assertVerdict(t, tt.name, checkPodCount(node, testPod("web"), NewHeld(activePods(tt.active)...)), "OutOfpods", tt.message)
	}
}

func TestAllocated(t *testing.T) {
	withInit := testPod("init")
	withInit.Spec.Containers[0].Resources.Requests = requests("cpu", "100m")
	withInit.Spec.InitContainers = []corev1.Container{restrictedContainer("init")}
	withInit.Spec.InitContainers[0].Resources.Requests = requests("cpu", "250m", "memory", "256Mi")
	active := append(activePods(2, "cpu", "100m", "memory", "128Mi", "example.com/gpu", "1"), withInit, testPod("besteffort"))

	got := Allocated(active)
	want := map[corev1.ResourceName]string{
		corev1.ResourceCPU:    "450m",
		corev1.ResourceMemory: "512Mi",
		"example.com/gpu":     "2",
		corev1.ResourcePods:   "4",
	}
	if len(got) != len(want) {
		t.Errorf("Allocated = %v, want %v", got, want)
	}
	for name, w := range want {
		if q := got[name]; q.String() != w {
			t.Errorf("Allocated[%s] = %s, want %s", name, q.String(), w)
		}
	}
	if q := Allocated(nil)[corev1.ResourcePods]; q.String() != "0" || len(Allocated(nil)) != 1 {
		t.Errorf("Allocated(nil) = %v, want pods 0 alone", Allocated(nil))
	}
}
