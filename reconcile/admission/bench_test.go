package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// BenchmarkAdmit is admission's cost per new pod on a node nearly full: 110
// active pods of two containers with requests, a toleration and a node
// selector each, and a new pod that passes every check (the whole path).
func BenchmarkAdmit(b *testing.B) {
	node := testNode()
	node.Allocatable[corev1.ResourcePods] = resource.MustParse("111")
	node.Allocatable[corev1.ResourceCPU] = resource.MustParse("64")
	node.Allocatable[corev1.ResourceMemory] = resource.MustParse("256Gi")
	node.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	typical := func(name string) *corev1.Pod {
		pod := testPod(name)
		pod.Spec.Containers = append(pod.Spec.Containers, restrictedContainer("sidecar"))
		pod.Spec.Containers[0].Resources.Requests = requests("cpu", "250m", "memory", "256Mi")
		pod.Spec.Containers[1].Resources.Requests = requests("cpu", "50m", "memory", "64Mi")
		pod.Spec.NodeSelector = map[string]string{"zone": "a"}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		return pod
	}
	active := make([]*corev1.Pod, 110)
	for i := range active {
		active[i] = typical("active")
	}
	pod := typical("new")
	for _, level := range []Level{LevelPrivileged, LevelBaseline, LevelRestricted} {
		node.PodSecurity = level
		if v := Admit(node, pod, active); !v.Admit {
			b.Fatalf("at %s: %+v", level, v)
		}
		b.Run(string(level), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Admit(node, pod, active)
			}
		})
	}
}
