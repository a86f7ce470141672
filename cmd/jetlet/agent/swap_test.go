package agent

import (
	"strings"
	"testing"

	cgroupsv3 "github.com/containerd/cgroups/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile"
)

func TestMemorySwapBehaviorFlagRefusesUnknownValues(t *testing.T) {
	cmd := NewRunCommand()
	cmd.SetArgs([]string{"--node", "n", "--data-dir", t.TempDir(), "--memory-swap-behavior", "UnlimitedSwap"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	want := `--memory-swap-behavior: invalid reconcile config: swap behavior "UnlimitedSwap": want NoSwap or LimitedSwap`
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("--memory-swap-behavior UnlimitedSwap: %v, want %q", err, want)
	}
}

// TestLimitedSwapNeedsCgroupV2: on a cgroup v1 host (CI's) LimitedSwap is
// refused at start with the reason; on a v2 host (the guest) it is taken,
// with the node's memory and swap.
func TestLimitedSwapNeedsCgroupV2(t *testing.T) {
	n := &nodeInfo{capacity: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}, swapCapacity: 1 << 30}
	s, err := memorySwap(reconcile.LimitedSwap, n)
	if cgroupsv3.Mode() != cgroupsv3.Unified {
		want := "--memory-swap-behavior: invalid reconcile config: swap behavior LimitedSwap needs cgroup v2 (memory.swap.max); this node's cgroups are v1, where only NoSwap is supported"
		if err == nil || err.Error() != want {
			t.Fatalf("LimitedSwap on cgroup v1: %v, want %q", err, want)
		}
		if _, err := memorySwap(reconcile.NoSwap, n); err != nil {
			t.Fatalf("NoSwap on cgroup v1: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("LimitedSwap on cgroup v2: %v", err)
	}
	if s.CgroupV1 || s.NodeMemory != 4<<30 || s.NodeSwap != 1<<30 {
		t.Errorf("LimitedSwap on cgroup v2: %+v", s)
	}
}
