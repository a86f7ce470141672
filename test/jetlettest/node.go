package jetlettest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/schemas"
)

// CheckNodeRecord checks what a `jetlet run` with the default node flags
// says of itself in jetlet_nodes (docs/contract.md section 12), whatever its
// runtime: kubelet's labels, a capacity of the host's, allocatable less the
// default hard eviction threshold of memory (100Mi), Ready, the three
// pressure conditions and NetworkUnavailable False (the runtime has a pod
// network), its addresses, the machine's swap, and an image named image among
// those it holds. It logs the record, as `jetlet get nodes -o json` prints it.
func CheckNodeRecord(t testing.TB, rec schemas.NodeRecord, image string) {
	t.Helper()
	out, _ := json.MarshalIndent(rec, "", "  ")
	t.Logf("node record:\n%s", out)
	for k, v := range map[string]string{"kubernetes.io/hostname": rec.Node, "kubernetes.io/os": "linux"} {
		if rec.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, rec.Labels[k], v)
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods} {
		c, a := rec.Capacity[name], rec.Allocatable[name]
		if c.Sign() <= 0 || a.Sign() <= 0 || a.Cmp(c) > 0 {
			t.Errorf("%s: capacity %s, allocatable %s; want both positive, allocatable at most capacity", name, c.String(), a.String())
		}
	}
	memory := rec.Capacity.Memory().DeepCopy()
	memory.Sub(resource.MustParse("100Mi"))
	if got := rec.Allocatable[corev1.ResourceMemory]; got.Cmp(memory) != 0 {
		t.Errorf("allocatable memory %s, want capacity less 100Mi (memory.available's hard threshold): %s", got.String(), memory.String())
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if swap := int64(si.Totalswap) * int64(si.Unit); rec.Swap == nil || rec.Swap.Capacity == nil || *rec.Swap.Capacity != swap {
		t.Errorf("swap %+v, want capacity %d (the machine's SwapTotal)", rec.Swap, swap)
	}
	if pods := rec.Capacity[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("capacity pods %s, want 110 (--max-pods)", pods.String())
	}
	want := map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: corev1.ConditionTrue, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse,
		corev1.NodeNetworkUnavailable: corev1.ConditionFalse,
	}
	for _, c := range rec.Conditions {
		if want[c.Type] != c.Status || c.Reason == "" || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %+v: want %s with a reason and a transition time", c, want[c.Type])
		}
		delete(want, c.Type)
	}
	if len(want) > 0 {
		t.Errorf("conditions missing: %v", want)
	}
	if !slices.Contains(rec.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: rec.Node}) {
		t.Errorf("addresses %v: no Hostname %s", rec.Addresses, rec.Node)
	}
	if !slices.ContainsFunc(rec.Images, func(im corev1.ContainerImage) bool {
		return im.SizeBytes > 0 && slices.ContainsFunc(im.Names, func(n string) bool { return strings.Contains(n, image) })
	}) {
		t.Errorf("images %v: none named %s with a size", rec.Images, image)
	}
}
