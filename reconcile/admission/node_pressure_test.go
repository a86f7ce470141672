package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestNodePressure(t *testing.T) {
	memory := []corev1.NodeConditionType{corev1.NodeMemoryPressure}
	disk := []corev1.NodeConditionType{corev1.NodeDiskPressure}
	bestEffort := func(pod *corev1.Pod) {}
	burstable := func(pod *corev1.Pod) { pod.Spec.Containers[0].Resources.Requests = requests("memory", "64Mi") }
	tests := []struct {
		name       string
		conditions []corev1.NodeConditionType
		mutate     func(pod *corev1.Pod)
		want       string
	}{
		{name: "no pressure, BestEffort", mutate: bestEffort},
		{name: "memory pressure, BestEffort", conditions: memory, mutate: bestEffort, want: "The node had condition: [MemoryPressure]. "},
		{name: "memory pressure, Burstable", conditions: memory, mutate: burstable},
		{
			name:       "memory pressure, Guaranteed",
			conditions: memory,
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Resources.Requests = requests("cpu", "100m", "memory", "64Mi")
				pod.Spec.Containers[0].Resources.Limits = requests("cpu", "100m", "memory", "64Mi")
			},
		},
		{
			name:       "memory pressure, BestEffort tolerating its taint",
			conditions: memory,
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
		},
		{
			name:       "memory pressure, BestEffort by spec but Burstable by its status",
			conditions: memory,
			mutate:     func(pod *corev1.Pod) { pod.Status.QOSClass = corev1.PodQOSBurstable },
		},
		{name: "disk pressure, Burstable", conditions: disk, mutate: burstable, want: "The node had condition: [DiskPressure]. "},
		{
			name:       "disk pressure, tolerating its taint",
			conditions: disk,
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists}}
			},
			want: "The node had condition: [DiskPressure]. ",
		},
		{
			name:       "memory and PID pressure, Burstable: every condition named",
			conditions: []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodePIDPressure},
			mutate:     burstable,
			want:       "The node had condition: [MemoryPressure PIDPressure]. ",
		},
		{
			name:       "disk pressure, a critical pod",
			conditions: disk,
			mutate:     func(pod *corev1.Pod) { pod.Spec.Priority = ptr.To(int32(2_000_000_000)) },
		},
		{
			name:       "disk pressure, a priority just short of critical",
			conditions: disk,
			mutate:     func(pod *corev1.Pod) { pod.Spec.Priority = ptr.To(int32(1_999_999_999)) },
			want:       "The node had condition: [DiskPressure]. ",
		},
	}
	for _, tt := range tests {
		node := testNode()
		node.Conditions = tt.conditions
		pod := testPod("web")
		tt.mutate(pod)
		assertVerdict(t, tt.name, checkNodePressure(node, pod, nil), ReasonEvicted, tt.want)
	}
}
