package client

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// usage is metrics-server's figures of nanocores (negative: no rate) and a
// working set.
func usage(nanoCores int64, workingSet uint64) corev1.ResourceList {
	cpu := &statsapi.CPUStats{}
	if nanoCores >= 0 {
		cpu.UsageNanoCores = new(uint64(nanoCores))
	}
	return schemas.ResourceUsage(cpu, &statsapi.MemoryStats{WorkingSetBytes: &workingSet})
}

// kubectl top's arithmetic: millicores rounded up, Mi rounded down, a
// pod's containers added up, percentages of the allocatable rounded down.
func TestTopTables(t *testing.T) {
	pods := []jc.PodTop{
		{Namespace: "default", Name: "burn", Containers: []jc.ContainerTop{{Name: "app", Usage: usage(1_000_000_001, 200<<20+1)}}},
		{Namespace: "default", Name: "two", Containers: []jc.ContainerTop{
			{Name: "a", Usage: usage(999_999, 1<<20-1)}, {Name: "b", Usage: usage(0, 1<<20)},
		}},
		{Namespace: "kube", Name: "new", Containers: []jc.ContainerTop{{Name: "app", Usage: usage(-1, 3<<20)}}},
	}
	for _, tc := range []struct {
		name                      string
		withNamespace, containers bool
		want                      string
	}{
		{"pods", false, false, `
NAME   CPU(cores)   MEMORY(bytes)
burn   1001m        200Mi
two    1m           1Mi
new    <unknown>    3Mi`},
		{"pods of every namespace, by container", true, true, `
NAMESPACE   POD    NAME   CPU(cores)   MEMORY(bytes)
default     burn   app    1001m        200Mi
default     two    a      1m           0Mi
default     two    b      0m           1Mi
kube        new    app    <unknown>    3Mi`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printTopPods(&b, pods, tc.withNamespace, tc.containers); err != nil {
				t.Fatal(err)
			}
			if got := trimLines(b.String()); got != strings.TrimPrefix(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	var b bytes.Buffer
	nodes := []jc.NodeTop{
		{Name: "n1", Usage: usage(1_500_000_000, 3<<30), Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}},
		{Name: "n2", Usage: usage(-1, 1<<30), Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}},
	}
	if err := printTopNodes(&b, nodes); err != nil {
		t.Fatal(err)
	}
	want := `NAME   CPU(cores)   CPU%        MEMORY(bytes)   MEMORY%
n1     1500m        75%         3072Mi          75%
n2     <unknown>    <unknown>   1024Mi          33%`
	if got := trimLines(b.String()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func trimLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
