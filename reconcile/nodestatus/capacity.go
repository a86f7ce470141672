package nodestatus

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// hugePagesDir lists a directory per huge page size the kernel offers.
const hugePagesDir = "/sys/kernel/mm/hugepages"

// ReadCapacity is the node's capacity as kubelet reports it: the CPUs this
// process may run on, the machine's RAM, the size of the file system that
// holds dataDir (pods' logs, emptyDirs and writable layers: kubelet's
// nodefs), each huge page size's pre-allocated pages, and maxPods.
func ReadCapacity(dataDir string, maxPods int) (corev1.ResourceList, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return nil, fmt.Errorf("node memory: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dataDir, &fs); err != nil {
		return nil, fmt.Errorf("node ephemeral storage (the file system of %s): %w", dataDir, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	pages, err := readHugePages(hugePagesDir)
	if err != nil {
		return nil, err
	}
	for name, q := range pages {
		capacity[name] = q
	}
	return capacity, nil
}

// readHugePages is each huge page size's capacity (its pre-allocated pages
// times its size), named as kubelet names it (hugepages-2Mi); none where
// the kernel has no huge pages.
func readHugePages(dir string) (corev1.ResourceList, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("huge pages: %w", err)
	}
	pages := corev1.ResourceList{}
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		kb, ok2 := strings.CutSuffix(kb, "kB")
		size, err := strconv.ParseInt(kb, 10, 64)
		if !ok || !ok2 || err != nil {
			continue
		}
		n, err := readInt(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, fmt.Errorf("huge pages of %d kB: %w", size, err)
		}
		name := corev1.ResourceName(corev1.ResourceHugePagesPrefix + resource.NewQuantity(size<<10, resource.BinarySI).String())
		pages[name] = *resource.NewQuantity(n*size<<10, resource.BinarySI)
	}
	return pages, nil
}

func readInt(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("%s: empty", path)
	}
	return strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
}

// ReadSwapCapacity is the machine's swap in bytes (/proc/meminfo's
// SwapTotal, cadvisor's SwapCapacity): 0 without swap.
func ReadSwapCapacity() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("node swap: %w", err)
	}
	return int64(si.Totalswap) * int64(si.Unit), nil
}
