package agent

import (
	"fmt"
	goruntime "runtime"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// nodeAllocatable is what the downward API reads for a limit a container does
// not set: the node's capacity, as kubelet's allocatable with no resources
// reserved: the CPUs this process may run on, the RAM, and the size of the
// file system holding the data dir (pods' logs and emptyDirs).
func nodeAllocatable(dataDir string) (corev1.ResourceList, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return nil, fmt.Errorf("node memory: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dataDir, &fs); err != nil {
		return nil, fmt.Errorf("node ephemeral storage: %w", err)
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI),
	}, nil
}
