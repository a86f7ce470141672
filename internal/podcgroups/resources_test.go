package podcgroups

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func pod(containers ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{}
	for _, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: r})
	}
	return p
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func TestPodResources(t *testing.T) {
	both := corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "64Mi"), Limits: list("cpu", "1", "memory", "128Mi")}
	reqOnly := corev1.ResourceRequirements{Requests: list("cpu", "250m")}
	guaranteed := corev1.ResourceRequirements{Requests: list("cpu", "2", "memory", "1Gi"), Limits: list("cpu", "2", "memory", "1Gi")}
	cpuOnlyLimit := corev1.ResourceRequirements{Limits: list("cpu", "100m")}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		qos  corev1.PodQOSClass
		want Resources
	}{
		{"best effort: minimum shares only", pod(corev1.ResourceRequirements{}), corev1.PodQOSBestEffort,
			Resources{CPUShares: u64(2)}},
		{"guaranteed: shares, quota, memory", pod(guaranteed), corev1.PodQOSGuaranteed,
			Resources{CPUShares: u64(2048), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(1 << 30)}},
		{"burstable, every container limited", pod(both, both), corev1.PodQOSBurstable,
			Resources{CPUShares: u64(1024), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(256 << 20)}},
		{"burstable, one container unlimited: shares only", pod(both, reqOnly), corev1.PodQOSBurstable,
			Resources{CPUShares: u64(768)}},
		{"burstable, cpu limit only (no request: minimum shares): quota, no memory", pod(cpuOnlyLimit), corev1.PodQOSBurstable,
			Resources{CPUShares: u64(2), CPUQuota: i64(10000), CPUPeriod: u64(100000)}},
		{"a tiny limit gets kubelet's 1 ms quota", pod(corev1.ResourceRequirements{Limits: list("cpu", "1m")}), corev1.PodQOSBurstable,
			Resources{CPUShares: u64(2), CPUQuota: i64(1000), CPUPeriod: u64(100000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := podResources(tc.pod, tc.qos, defaultCPUPeriod)
			if s := diff(got, tc.want); s != "" {
				t.Error(s)
			}
		})
	}
}

func TestPodResourcesCountOverhead(t *testing.T) {
	p := pod(corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "1", "memory", "1Gi")})
	p.Spec.Overhead = list("cpu", "250m", "memory", "64Mi")
	got := podResources(p, corev1.PodQOSGuaranteed, defaultCPUPeriod)
	want := Resources{CPUShares: u64(1280), CPUQuota: i64(125000), CPUPeriod: u64(100000), Memory: i64(1<<30 + 64<<20)}
	if s := diff(got, want); s != "" {
		t.Error(s)
	}
}

func TestKubepodsResources(t *testing.T) {
	got := kubepodsResources(list("cpu", "2", "memory", "4Gi", "pods", "110"))
	if s := diff(got, Resources{CPUShares: u64(2048), Memory: i64(4 << 30)}); s != "" {
		t.Error(s)
	}
}

func TestSharesAndQuotaConversions(t *testing.T) {
	for _, tc := range []struct{ shares, weight uint64 }{{2, 1}, {1024, 39}, {262144, 10000}} {
		if got := sharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("weight of %d shares = %d, want %d", tc.shares, got, tc.weight)
		}
	}
	for _, tc := range []struct {
		quota  int64
		period uint64
		perSec uint64
	}{{50000, 100000, 500000}, {1000, 100000, 10000}, {12345, 100000, 130000}, {-1, 100000, infinity}} {
		if got := quotaPerSec(tc.quota, tc.period); got != tc.perSec {
			t.Errorf("quota %d/%d = %d µs/s, want %d", tc.quota, tc.period, got, tc.perSec)
		}
	}
}

func diff(got, want Resources) string {
	s := ""
	u := func(name string, a, b *uint64) {
		if (a == nil) != (b == nil) || a != nil && *a != *b {
			s += name + ": " + show(a) + ", want " + show(b) + "\n"
		}
	}
	i := func(name string, a, b *int64) {
		var ua, ub *uint64
		if a != nil {
			ua = u64(uint64(*a))
		}
		if b != nil {
			ub = u64(uint64(*b))
		}
		u(name, ua, ub)
	}
	u("CPUShares", got.CPUShares, want.CPUShares)
	i("CPUQuota", got.CPUQuota, want.CPUQuota)
	u("CPUPeriod", got.CPUPeriod, want.CPUPeriod)
	i("Memory", got.Memory, want.Memory)
	i("PidsLimit", got.PidsLimit, want.PidsLimit)
	return s
}

func show(v *uint64) string {
	if v == nil {
		return "unset"
	}
	return resource.NewQuantity(int64(*v), resource.DecimalSI).String()
}
