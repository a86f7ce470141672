package reconcile

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/test/fakecri"
)

// The resource downward API as kubelet's: requests and limits divided by the
// divisor and rounded up, unset limits read from the node's allocatable,
// another container's resources by containerName.
func TestResourceFieldRefEnv(t *testing.T) {
	m, err := New(fakecri.New(), &eventLog{}, Config{NodeName: "n1", DataDir: t.TempDir(),
		NodeAllocatable: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("8Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}})
	if err != nil {
		t.Fatal(err)
	}
	ref := func(name, res, divisor, container string) corev1.EnvVar {
		f := &corev1.ResourceFieldSelector{Resource: res, ContainerName: container}
		if divisor != "" {
			f.Divisor = resource.MustParse(divisor)
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: f}}
	}
	app := corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				"hugepages-2Mi": resource.MustParse("4Mi")},
		},
		Env: []corev1.EnvVar{
			ref("LIMIT_CPU", "limits.cpu", "", ""),     // 1.5 cores rounded up: 2
			ref("LIMIT_CPU_M", "limits.cpu", "1m", ""), // 1500
			ref("REQ_CPU_M", "requests.cpu", "1m", ""), // 250
			ref("LIMIT_MEM", "limits.memory", "", ""),  // bytes
			ref("LIMIT_MEM_MI", "limits.memory", "1Mi", ""),
			ref("REQ_MEM_M", "requests.memory", "1M", ""),              // 104857600 / 10^6 rounded up: 105
			ref("LIMIT_EPH_GI", "limits.ephemeral-storage", "1Gi", ""), // unset: allocatable
			ref("REQ_EPH", "requests.ephemeral-storage", "", ""),       // unset: 0
			ref("HUGE", "limits.hugepages-2Mi", "1Mi", ""),
			ref("SIDE_LIMIT_CPU", "limits.cpu", "", "side"), // unset there: allocatable
			ref("SIDE_LIMIT_MEM_MI", "limits.memory", "1Mi", "side"),
		},
	}
	side := corev1.Container{Name: "side", Image: "img:1", Command: []string{"x"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}
	pod := testPod(app, side)
	envs, err := m.makeEnvironmentVariables(context.Background(), pod, &pod.Spec.Containers[0], podNetwork{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range envs {
		got[e.Key] = string(e.Value)
	}
	want := map[string]string{
		"LIMIT_CPU": "2", "LIMIT_CPU_M": "1500", "REQ_CPU_M": "250",
		"LIMIT_MEM": "134217728", "LIMIT_MEM_MI": "128", "REQ_MEM_M": "105",
		"LIMIT_EPH_GI": "100", "REQ_EPH": "0", "HUGE": "4",
		"SIDE_LIMIT_CPU": "4", "SIDE_LIMIT_MEM_MI": "64",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}

	// Without the node's allocatable an unset limit is an error, not 0.
	bare, _ := newTestManager(t, fakecri.New())
	pod.Spec.Containers[0].Env = []corev1.EnvVar{ref("E", "limits.ephemeral-storage", "", "")}
	if _, err := bare.makeEnvironmentVariables(context.Background(), pod, &pod.Spec.Containers[0], podNetwork{}); err == nil || !strings.Contains(err.Error(), "allocatable") {
		t.Errorf("unset limit without allocatable: %v", err)
	}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{ref("E", "limits.cpu", "", "nope")}
	if _, err := m.makeEnvironmentVariables(context.Background(), pod, &pod.Spec.Containers[0], podNetwork{}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown container: %v", err)
	}
}
