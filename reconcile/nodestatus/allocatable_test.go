package nodestatus

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func list(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func TestAllocatable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity corev1.ResourceList
		reserved []corev1.ResourceList
		want     corev1.ResourceList
	}{
		{"nothing reserved", list("cpu", "2", "memory", "8Gi", "pods", "110"), nil, list("cpu", "2", "memory", "8Gi", "pods", "110")},
		{"kube, system and eviction reservations add up",
			list("cpu", "2", "memory", "8Gi", "ephemeral-storage", "100Gi", "pods", "110"),
			[]corev1.ResourceList{list("cpu", "100m", "memory", "1Gi"), list("cpu", "200m", "memory", "512Mi"), list("memory", "100Mi", "ephemeral-storage", "10Gi")},
			list("cpu", "1700m", "memory", "6556Mi", "ephemeral-storage", "90Gi", "pods", "110")},
		{"never below zero", list("cpu", "1", "memory", "1Gi"), []corev1.ResourceList{list("cpu", "2", "memory", "2Gi")}, list("cpu", "0", "memory", "0")},
		{"huge pages leave memory", list("memory", "8Gi", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi"), nil,
			list("memory", "5Gi", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "2Gi")},
	} {
		if got := Allocatable(tc.capacity, tc.reserved...); !equalLists(got, tc.want) {
			t.Errorf("%s: Allocatable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReadHugePages(t *testing.T) {
	dir := t.TempDir()
	for name, n := range map[string]string{"hugepages-2048kB": "512\n", "hugepages-1048576kB": "0\n", "not-pages": "9"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "nr_hugepages"), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readHugePages(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := list("hugepages-2Mi", "1Gi", "hugepages-1Gi", "0"); !equalLists(got, want) {
		t.Errorf("readHugePages = %v, want %v", got, want)
	}
	if got, err := readHugePages(filepath.Join(dir, "absent")); err != nil || len(got) != 0 {
		t.Errorf("no huge pages: %v, %v", got, err)
	}
}

func TestReadCapacityOfThisMachine(t *testing.T) {
	got, err := ReadCapacity(t.TempDir(), 110)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q := got[name]; q.Sign() <= 0 {
			t.Errorf("capacity %s = %v, want > 0", name, q.String())
		}
	}
	if q := got[corev1.ResourcePods]; q.Value() != 110 {
		t.Errorf("pods = %v, want 110", q.String())
	}
}
