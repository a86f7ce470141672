package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The pod cgroup's values, after kubelet's
// TestResourceConfigForPodWithPodLevelResources and
// TestResourceConfigForPod rows: pod-level limits stand for the
// containers', pod-level requests give the shares, a Burstable pod gets a
// limit only when the pod level or every container sets it.
func TestPodSandboxResources(t *testing.T) {
	list := func(cpu, memory string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if memory != "" {
			l[corev1.ResourceMemory] = resource.MustParse(memory)
		}
		return l
	}
	rr := func(req, lim corev1.ResourceList) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
	tests := []struct {
		name       string
		pod        *corev1.ResourceRequirements
		containers []corev1.ResourceRequirements
		noQuota    bool
		want       *runtimeapi.LinuxContainerResources
	}{
		{name: "best effort", containers: []corev1.ResourceRequirements{{}},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2}},
		{name: "guaranteed containers", containers: []corev1.ResourceRequirements{rr(list("100m", "100Mi"), list("100m", "100Mi")), rr(list("200m", "50Mi"), list("200m", "50Mi"))},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 307, CpuQuota: 30000, CpuPeriod: 100000, MemoryLimitInBytes: 150 << 20}},
		{name: "burstable, one container without limits", containers: []corev1.ResourceRequirements{rr(list("100m", "100Mi"), list("200m", "200Mi")), rr(list("100m", ""), nil)},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 204}},
		{name: "guaranteed pod level, containers without resources", pod: &corev1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")},
			containers: []corev1.ResourceRequirements{{}, {}},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: 1 << 30}},
		{name: "burstable pod level limits over the containers'", pod: &corev1.ResourceRequirements{Requests: list("500m", "256Mi"), Limits: list("2", "1Gi")},
			containers: []corev1.ResourceRequirements{rr(list("100m", "100Mi"), list("1", "512Mi")), {}},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 200000, CpuPeriod: 100000, MemoryLimitInBytes: 1 << 30}},
		{name: "pod level memory limit only", pod: &corev1.ResourceRequirements{Requests: list("", "256Mi"), Limits: list("", "512Mi")},
			containers: []corev1.ResourceRequirements{rr(list("250m", ""), nil)},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 256, MemoryLimitInBytes: 512 << 20}},
		{name: "pod level requests only", pod: &corev1.ResourceRequirements{Requests: list("1", "1Gi")},
			containers: []corev1.ResourceRequirements{{}},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 1024}},
		{name: "no CFS quota", pod: &corev1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")},
			containers: []corev1.ResourceRequirements{{}}, noQuota: true,
			want: &runtimeapi.LinuxContainerResources{CpuShares: 1024, MemoryLimitInBytes: 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tt.pod}}
			for i, r := range tt.containers {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Resources: r})
			}
			m := &Kuberuntime{cfg: Config{DisableCPUQuota: tt.noQuota}}
			got := m.podSandboxResources(pod)
			if !sameCgroupValues(got, tt.want) || got.CpuPeriod != tt.want.CpuPeriod || got.CpuQuota != tt.want.CpuQuota {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
