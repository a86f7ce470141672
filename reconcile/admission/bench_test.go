package admission

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// BenchmarkAdmit is admission's cost per new pod beside 110 and 1,000
// active pods of two containers with requests, a toleration and a node
// selector each (the node nearly full at 110), and a new pod that passes
// every check (the whole path). What the active pods hold is kept (Held), so
// the cost does not grow with them; each pod's requests were summed for
// every decision before.
func BenchmarkAdmit(b *testing.B) {
	node := testNode()
	node.Allocatable[corev1.ResourceCPU] = resource.MustParse("640")
	node.Allocatable[corev1.ResourceMemory] = resource.MustParse("2560Gi")
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
	pod := typical("new")
	for _, pods := range []int{110, 1000} {
		held := NewHeld()
		for i := range pods {
			held.Set(typical(fmt.Sprintf("active-%d", i)))
		}
		node.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(int64(pods+1), resource.DecimalSI)
		for _, level := range []Level{LevelPrivileged, LevelBaseline, LevelRestricted} {
			node.PodSecurity = level
			if v := Admit(node, pod, held); !v.Admit {
				b.Fatalf("at %s: %+v", level, v)
			}
			b.Run(fmt.Sprintf("pods=%d/%s", pods, level), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					Admit(node, pod, held)
				}
			})
		}
	}
}
