package agent

import (
	"fmt"
	"os"
	"path/filepath"

	cgroupsv3 "github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup2"

	"github.com/jetlet/jetlet/reconcile"
)

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// memorySwap is how pods may use swap: --memory-swap-behavior with the
// node's memory and swap, and whether its cgroups account swap, found as
// kubelet finds it (memory.swap.max in jetlet's own cgroup on v2,
// memory.memsw.limit_in_bytes on v1). LimitedSwap on cgroup v1 is refused.
func memorySwap(behavior reconcile.SwapBehavior, n *nodeInfo) (reconcile.MemorySwap, error) {
	s := reconcile.MemorySwap{Behavior: behavior, NodeMemory: n.capacity.Memory().Value(), NodeSwap: n.swapCapacity}
	if cgroupsv3.Mode() == cgroupsv3.Unified {
		own, err := cgroup2.NestedGroupPath("")
		if err == nil {
			_, err = os.Stat(filepath.Join(cgroupRoot, own, "memory.swap.max"))
		}
		s.Accounted = err == nil
	} else {
		s.CgroupV1 = true
		_, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes"))
		s.Accounted = err == nil
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("--memory-swap-behavior: %w", err)
	}
	return s, nil
}
