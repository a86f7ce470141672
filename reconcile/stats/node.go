package stats

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// NodeMemory is the node's memory as cadvisor and kubelet measure it, in
// bytes: the machine's, what its root cgroup uses, and of that the working
// set, usage less the inactive file pages the kernel can drop under
// pressure.
type NodeMemory struct {
	Capacity, Usage, WorkingSet int64
}

// ReadNodeMemory measures the node's memory from procDir's meminfo and the
// root of the cgroup file systems at cgroupDir (v1 or v2).
func ReadNodeMemory(procDir, cgroupDir string) (NodeMemory, error) {
	meminfo, err := readKeyValues(filepath.Join(procDir, "meminfo"), ":")
	if err != nil {
		return NodeMemory{}, fmt.Errorf("memory: %w", err)
	}
	usage, inactiveFile, err := rootMemoryUsage(cgroupDir, meminfo)
	if err != nil {
		return NodeMemory{}, fmt.Errorf("memory: %w", err)
	}
	m := NodeMemory{Capacity: meminfo["MemTotal"] * 1024, Usage: usage, WorkingSet: usage}
	if inactiveFile < usage {
		m.WorkingSet -= inactiveFile
	}
	return m, nil
}

// rootMemoryUsage is the root cgroup's memory usage and inactive file pages.
// cgroup v2 has no memory.current at the root; there usage is what
// /proc/meminfo says is not free, as runc reads it.
func rootMemoryUsage(cgroupDir string, meminfo map[string]int64) (usage, inactiveFile int64, err error) {
	if _, err := os.Stat(filepath.Join(cgroupDir, "cgroup.controllers")); err == nil {
		usage = (meminfo["MemTotal"] - meminfo["MemFree"]) * 1024
		stat, err := readKeyValues(filepath.Join(cgroupDir, "memory.stat"), " ")
		if err != nil {
			// Kernels before 5.x have no memory.stat at the v2 root.
			return usage, meminfo["Inactive(file)"] * 1024, nil
		}
		return usage, stat["inactive_file"], nil
	}
	dir := filepath.Join(cgroupDir, "memory")
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, 0, err
	}
	if usage, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("memory.usage_in_bytes: %w", err)
	}
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"), " ")
	if err != nil {
		return 0, 0, err
	}
	return usage, stat["total_inactive_file"], nil
}

// userHZ is the unit of /proc/stat's times: 1/100 s on every Linux
// architecture (the kernel's USER_HZ, what sysconf(_SC_CLK_TCK) says).
const userHZ = 100

// nodeCPU is the CPU time the node's cores spent busy (all but idle and
// iowait; guest time is inside user) and when it booted, from /proc/stat.
func nodeCPU(procDir string) (usage uint64, boot time.Time, err error) {
	f, err := os.Open(filepath.Join(procDir, "stat"))
	if err != nil {
		return 0, time.Time{}, err
	}
	defer f.Close()
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 9 && fields[0] == "cpu":
			// user nice system idle iowait irq softirq steal
			for _, i := range []int{1, 2, 3, 6, 7, 8} {
				n, err := strconv.ParseUint(fields[i], 10, 64)
				if err != nil {
					return 0, time.Time{}, fmt.Errorf("/proc/stat cpu line: %w", err)
				}
				usage += n
			}
			found = true
		case len(fields) == 2 && fields[0] == "btime":
			s, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, time.Time{}, fmt.Errorf("/proc/stat btime: %w", err)
			}
			boot = time.Unix(s, 0)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, time.Time{}, err
	}
	if !found {
		return 0, time.Time{}, fmt.Errorf("%s: no cpu line", f.Name())
	}
	return usage * (uint64(time.Second) / userHZ), boot, nil
}

// readKeyValues reads "key<sep> value [unit]" lines (meminfo, memory.stat).
func readKeyValues(path, sep string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), sep)
		fields := strings.Fields(rest)
		if !ok || len(fields) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			values[key] = n
		}
	}
	return values, sc.Err()
}

// nodePressure is the kernel's pressure stall information for resource
// (cpu, memory, io) from procDir/pressure: nil where the kernel has none.
// The kernel's totals are in µs, the Summary's in ns.
func nodePressure(procDir, resource string) (*statsapi.PSIStats, error) {
	b, err := os.ReadFile(filepath.Join(procDir, "pressure", resource))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, nil // no PSI in this kernel, or psi=0 on its command line
	}
	if err != nil {
		return nil, err
	}
	out := &statsapi.PSIStats{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		var d *statsapi.PSIData
		switch {
		case len(fields) == 0:
			continue
		case fields[0] == "some":
			d = &out.Some
		case fields[0] == "full":
			d = &out.Full
		default:
			return nil, fmt.Errorf("pressure/%s: line %q", resource, line)
		}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			var err error
			switch k {
			case "avg10":
				d.Avg10, err = strconv.ParseFloat(v, 64)
			case "avg60":
				d.Avg60, err = strconv.ParseFloat(v, 64)
			case "avg300":
				d.Avg300, err = strconv.ParseFloat(v, 64)
			case "total":
				d.Total, err = strconv.ParseUint(v, 10, 64)
				d.Total *= 1000
			}
			if err != nil {
				return nil, fmt.Errorf("pressure/%s: %q: %w", resource, f, err)
			}
		}
	}
	return out, nil
}
