package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPodQOS: kubelet's cases (pkg/apis/core/v1/helper/qos/qos_test.go).
func TestPodQOS(t *testing.T) {
	// resources are a container's "requests" and "limits".
	type resources struct{ requests, limits corev1.ResourceList }
	guaranteed := resources{requests("cpu", "100m", "memory", "100Mi"), requests("cpu", "100m", "memory", "100Mi")}
	tests := []struct {
		name       string
		containers []resources
		init       []resources
		podLevel   *resources
		status     corev1.PodQOSClass
		want       corev1.PodQOSClass
	}{
		{name: "nothing asked", containers: []resources{{}}, want: corev1.PodQOSBestEffort},
		{name: "no containers", want: corev1.PodQOSBestEffort},
		{name: "ephemeral storage only", containers: []resources{{requests: requests("ephemeral-storage", "1Gi")}}, want: corev1.PodQOSBestEffort},
		{
			name:       "extended resources only",
			containers: []resources{{requests("example.com/gpu", "1"), requests("example.com/gpu", "1")}},
			want:       corev1.PodQOSBestEffort,
		},
		{name: "cpu requested", containers: []resources{{requests: requests("cpu", "100m")}}, want: corev1.PodQOSBurstable},
		{name: "cpu and memory at their limits", containers: []resources{guaranteed, guaranteed}, want: corev1.PodQOSGuaranteed},
		{
			name:       "a request under its limit",
			containers: []resources{{requests("cpu", "100m", "memory", "100Mi"), requests("cpu", "200m", "memory", "100Mi")}},
			want:       corev1.PodQOSBurstable,
		},
		{
			name:       "cpu at its limit, memory not asked",
			containers: []resources{{requests("cpu", "100m"), requests("cpu", "100m")}},
			want:       corev1.PodQOSBurstable,
		},
		{name: "one Guaranteed container, one BestEffort", containers: []resources{guaranteed, {}}, want: corev1.PodQOSBurstable},
		{
			name:       "a Burstable init container",
			containers: []resources{guaranteed},
			init:       []resources{{requests: requests("cpu", "100m")}},
			want:       corev1.PodQOSBurstable,
		},
		{name: "a Guaranteed init container", containers: []resources{guaranteed}, init: []resources{guaranteed}, want: corev1.PodQOSGuaranteed},
		{name: "pod-level resources decide alone", containers: []resources{{}}, podLevel: &guaranteed, want: corev1.PodQOSGuaranteed},
		{name: "empty pod-level resources", containers: []resources{guaranteed}, podLevel: &resources{}, want: corev1.PodQOSBestEffort},
		// kubelet's TestComputePodQOSWithPodLevelResources rows.
		{name: "pod-level guaranteed over burstable containers", containers: []resources{{requests: requests("cpu", "50m")}}, podLevel: &guaranteed, want: corev1.PodQOSGuaranteed},
		{name: "pod-level cpu limit only", containers: []resources{guaranteed}, podLevel: &resources{limits: requests("cpu", "1")}, want: corev1.PodQOSBurstable},
		{name: "pod-level requests only", containers: []resources{{}}, podLevel: &resources{requests: requests("cpu", "1", "memory", "1Gi")}, want: corev1.PodQOSBurstable},
		{name: "pod-level requests under their limits", containers: []resources{{}},
			podLevel: &resources{requests("cpu", "500m", "memory", "1Gi"), requests("cpu", "1", "memory", "1Gi")}, want: corev1.PodQOSBurstable},
		{name: "pod-level huge pages only", containers: []resources{guaranteed},
			podLevel: &resources{requests("hugepages-2Mi", "4Mi"), requests("hugepages-2Mi", "4Mi")}, want: corev1.PodQOSBestEffort},
		{name: "the status's class", containers: []resources{{}}, status: corev1.PodQOSGuaranteed, want: corev1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{Status: corev1.PodStatus{QOSClass: tt.status}}
		for i, r := range tt.containers {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)),
				Resources: corev1.ResourceRequirements{Requests: r.requests, Limits: r.limits}})
		}
		for i, r := range tt.init {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: string(rune('i' + i)),
				Resources: corev1.ResourceRequirements{Requests: r.requests, Limits: r.limits}})
		}
		if tt.podLevel != nil {
			pod.Spec.Resources = &corev1.ResourceRequirements{Requests: tt.podLevel.requests, Limits: tt.podLevel.limits}
		}
		if got := PodQOS(pod); got != tt.want {
			t.Errorf("%s: PodQOS = %s, want %s", tt.name, got, tt.want)
		}
	}
}
