package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	cgroup2stats "github.com/containerd/cgroups/v3/cgroup2/stats"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrUnsupported is wrapped by the errors of resources the host's cgroups
// cannot apply.
var ErrUnsupported = errors.New("cgroups: unsupported")

// Cgroup is one pod's or container's cgroup. It holds no open files: every
// call reads or writes the cgroup's files.
type Cgroup struct {
	m     *Hierarchy
	paths Paths
}

// Create creates (or takes over) the cgroup at paths and applies res, and a
// pids limit when pidsLimit > 0 (kubelet's --pod-max-pids; 0 or -1: none).
// devices, when not nil, are the only devices the cgroup's processes may
// create, read or write (DefaultDevices and a container's own); nil leaves
// the parent's rules (a pod, a privileged container).
func (m *Hierarchy) Create(paths Paths, res *runtimeapi.LinuxContainerResources, pidsLimit int64, devices []DeviceRule) (*Cgroup, error) {
	if m.mode == Off {
		return nil, fmt.Errorf("%w: cgroups are off: %s", ErrUnsupported, m.reason)
	}
	c := &Cgroup{m: m, paths: paths}
	for _, d := range devices {
		if d.Type == "" || d.Major == nil || d.Minor == nil {
			return nil, fmt.Errorf("cgroup %s: device rule (type %q, access %q): a type and both numbers (or Wildcard) are needed", c, d.Type, d.Access)
		}
	}
	spec, err := m.spec(res, pidsLimit)
	if err != nil {
		return nil, err
	}
	if devices != nil {
		// Deny all first: only the rules that follow remain.
		spec.Devices = append([]DeviceRule{denyAllDevices}, devices...)
	}
	switch m.mode {
	case V1:
		_, err = cgroup1.New(m.v1Path(paths), spec, m.v1Opts()...)
	case V2:
		res := cgroup2.ToResources(spec)
		res.Devices = spec.Devices // not converted by ToResources; an eBPF filter
		var mgr *cgroup2.Manager
		if mgr, err = cgroup2.NewManager(m.unified, paths[""], res); err == nil {
			// NewManager enables only the controllers of the limits set.
			err = mgr.ToggleControllers(m.controllers, cgroup2.Enable)
		}
		if err == nil {
			err = writeUnified(filepath.Join(m.unified, paths[""]), spec.Unified)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", c, err)
	}
	return c, nil
}

// Load is the cgroup at paths, as recorded; nil when cgroups are off or paths
// is empty. It does no I/O.
func (m *Hierarchy) Load(paths Paths) *Cgroup {
	if m.mode == Off || len(paths) == 0 {
		return nil
	}
	return &Cgroup{m: m, paths: paths}
}

// Paths are where the cgroup lives, for the runtime's records; nil for a nil
// Cgroup.
func (c *Cgroup) Paths() Paths {
	if c == nil {
		return nil
	}
	return c.paths
}

func (c *Cgroup) String() string {
	if p, ok := c.paths[""]; ok {
		return p
	}
	return c.paths[string(cgroup1.Memory)]
}

// spec translates CRI resources into the OCI resources the library applies.
func (m *Hierarchy) spec(res *runtimeapi.LinuxContainerResources, pidsLimit int64) (*specs.LinuxResources, error) {
	out := &specs.LinuxResources{}
	if pidsLimit > 0 {
		out.Pids = &specs.LinuxPids{Limit: &pidsLimit}
	}
	if res == nil {
		return out, nil
	}
	cpu := &specs.LinuxCPU{Cpus: res.GetCpusetCpus(), Mems: res.GetCpusetMems()}
	if v := res.GetCpuShares(); v > 0 {
		shares := uint64(v)
		cpu.Shares = &shares
	}
	if v := res.GetCpuPeriod(); v > 0 {
		period := uint64(v)
		cpu.Period = &period
	}
	if v := res.GetCpuQuota(); v != 0 {
		cpu.Quota = &v
		if cpu.Period == nil {
			period := uint64(100000) // the kernel's default
			cpu.Period = &period
		}
	}
	out.CPU = cpu
	mem := &specs.LinuxMemory{}
	if v := res.GetMemoryLimitInBytes(); v > 0 {
		mem.Limit = &v
	}
	if v := res.GetMemorySwapLimitInBytes(); v > 0 && m.swap {
		mem.Swap = &v
	}
	out.Memory = mem
	if m.hasHugetlb() {
		for _, h := range res.GetHugepageLimits() {
			out.HugepageLimits = append(out.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: h.GetPageSize(), Limit: h.GetLimit()})
		}
	}
	if u := res.GetUnified(); len(u) > 0 {
		if m.mode != V2 {
			return nil, fmt.Errorf("%w: unified resources %v need cgroup v2; this host uses cgroup v1", ErrUnsupported, keys(u))
		}
		for k := range u {
			if !unifiedKey.MatchString(k) {
				return nil, fmt.Errorf("%w: unified resource %q is not a cgroup v2 interface file (<controller>.<name>)", ErrUnsupported, k)
			}
		}
		out.Unified = u
	}
	return out, nil
}

// unifiedKey is a cgroup v2 interface file's name: no path, no dot file.
var unifiedKey = regexp.MustCompile(`^[a-z0-9_]+\.[a-z0-9_.]+$`)

// writeUnified writes the unified resources to the cgroup at dir, as runc
// does (the cgroup library converts the OCI resources only). A file the
// kernel does not have (memory.swap.max without swap accounting) fails.
func writeUnified(dir string, unified map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(unified)) {
		f, err := os.OpenFile(filepath.Join(dir, k), os.O_WRONLY|os.O_TRUNC, 0)
		if err == nil {
			_, err = f.WriteString(unified[k])
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("unified resource %s=%q: %w", k, unified[k], err)
		}
	}
	return nil
}

// memoryDir is the v1 memory hierarchy's directory of the cgroup at paths.
func (m *Hierarchy) memoryDir(paths Paths) string {
	for _, s := range m.v1 {
		if s.Name() == cgroup1.Memory {
			return hierarchyDir(s, paths[string(cgroup1.Memory)])
		}
	}
	return ""
}

func (m *Hierarchy) hasHugetlb() bool {
	if m.mode == V2 {
		return true
	}
	for _, s := range m.v1 {
		if s.Name() == cgroup1.Hugetlb {
			return true
		}
	}
	return false
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ProcsFiles are the cgroup.procs files a process is placed in the cgroup
// through: one per v1 hierarchy (hierarchies mounted together counted once),
// or the one v2 file.
func (c *Cgroup) ProcsFiles() []string {
	seen := map[string]bool{}
	var out []string
	for _, dir := range c.dirs() {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			if seen[real] {
				continue
			}
			seen[real] = true
		}
		out = append(out, filepath.Join(dir, "cgroup.procs"))
	}
	return out
}

// Update applies res to the live cgroup (limits left unset keep their value).
func (c *Cgroup) Update(res *runtimeapi.LinuxContainerResources) error {
	spec, err := c.m.spec(res, 0)
	if err != nil {
		return err
	}
	switch c.m.mode {
	case V1:
		var g cgroup1.Cgroup
		if g, err = cgroup1.Load(c.m.v1Path(c.paths), c.m.v1Opts()...); err == nil {
			err = c.raiseMemswFirst(spec.Memory)
		}
		if err == nil {
			err = g.Update(spec)
		}
	case V2:
		var g *cgroup2.Manager
		if g, err = cgroup2.Load(c.paths[""], cgroup2.WithMountpoint(c.m.unified)); err == nil {
			err = g.Update(cgroup2.ToResources(spec))
		}
		if err == nil {
			err = writeUnified(filepath.Join(c.m.unified, c.paths[""]), spec.Unified)
		}
	}
	if err != nil {
		return fmt.Errorf("update cgroup %s: %w", c, err)
	}
	return nil
}

// Stats is a cgroup's usage, in the terms of the CRI's Linux stats.
type Stats struct {
	CPUUsageNanos uint64 // cumulative CPU time
	MemoryUsage   uint64
	// WorkingSet is usage less inactive file pages, as kubelet computes it.
	WorkingSet      uint64
	RSS             uint64
	PageFaults      uint64
	MajorPageFaults uint64
	MemoryLimit     uint64 // 0: unlimited
	SwapUsage       uint64
	SwapLimit       uint64 // 0: unlimited or not accounted
	Processes       uint64 // 0 without the pids controller
	// The pressure stall information of the cgroup's CPU, memory and IO:
	// cgroup v2 on a kernel with PSI only (nil otherwise).
	CPUPressure, MemoryPressure, IOPressure *runtimeapi.PsiStats
}

// pressure is the CRI's PSI of the kernel's: its totals are in
// nanoseconds, the kernel's in microseconds.
func pressure(p *cgroup2stats.PSIStats) *runtimeapi.PsiStats {
	if p == nil {
		return nil
	}
	data := func(d *cgroup2stats.PSIData) *runtimeapi.PsiData {
		if d == nil {
			return nil
		}
		return &runtimeapi.PsiData{Total: d.GetTotal() * 1000, Avg10: d.GetAvg10(), Avg60: d.GetAvg60(), Avg300: d.GetAvg300()}
	}
	return &runtimeapi.PsiStats{Full: data(p.GetFull()), Some: data(p.GetSome())}
}

// unlimited: v1 reports no limit as a number near 2^63, v2 as "max".
func limit(v uint64) uint64 {
	if v >= 1<<62 {
		return 0
	}
	return v
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// Stats reads the cgroup's usage.
func (c *Cgroup) Stats() (*Stats, error) {
	switch c.m.mode {
	case V1:
		g, err := cgroup1.Load(c.m.v1Path(c.paths), c.m.v1Opts()...)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		mt, err := g.Stat(cgroup1.IgnoreNotExist)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		st := &Stats{CPUUsageNanos: mt.GetCPU().GetUsage().GetTotal(), Processes: mt.GetPids().GetCurrent()}
		if mem := mt.GetMemory(); mem != nil {
			st.MemoryUsage = mem.GetUsage().GetUsage()
			st.WorkingSet = sub(st.MemoryUsage, mem.GetTotalInactiveFile())
			st.RSS = mem.GetTotalRSS()
			st.PageFaults = mem.GetTotalPgFault()
			st.MajorPageFaults = mem.GetTotalPgMajFault()
			st.MemoryLimit = limit(mem.GetUsage().GetLimit())
			if c.m.swap { // memsw counts memory and swap together
				st.SwapUsage = sub(mem.GetSwap().GetUsage(), st.MemoryUsage)
				if sw := limit(mem.GetSwap().GetLimit()); sw != 0 {
					st.SwapLimit = sub(sw, st.MemoryLimit)
				}
			}
		}
		return st, nil
	default:
		g, err := cgroup2.Load(c.paths[""], cgroup2.WithMountpoint(c.m.unified))
		if err == nil {
			_, err = os.Stat(filepath.Join(c.m.unified, c.paths[""]))
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		mt, err := g.Stat()
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		mem := mt.GetMemory()
		return &Stats{
			CPUUsageNanos:   mt.GetCPU().GetUsageUsec() * 1000,
			MemoryUsage:     mem.GetUsage(),
			WorkingSet:      sub(mem.GetUsage(), mem.GetInactiveFile()),
			RSS:             mem.GetAnon(),
			PageFaults:      mem.GetPgfault(),
			MajorPageFaults: mem.GetPgmajfault(),
			MemoryLimit:     limit(mem.GetUsageLimit()),
			SwapUsage:       mem.GetSwapUsage(),
			SwapLimit:       limit(mem.GetSwapLimit()),
			Processes:       mt.GetPids().GetCurrent(),
			CPUPressure:     pressure(mt.GetCPU().GetPSI()),
			MemoryPressure:  pressure(mem.GetPSI()),
			IOPressure:      pressure(mt.GetIo().GetPSI()),
		}, nil
	}
}

// OOMKilled reports whether the kernel OOM-killed a process of the cgroup:
// memory.events oom_kill under v2, memory.oom_control oom_kill under v1
// (Linux 4.13 and later); on older kernels, a failed charge at the limit.
func (c *Cgroup) OOMKilled() bool {
	if c.m.mode == V2 {
		n, ok := readKey(filepath.Join(c.m.unified, c.paths[""], "memory.events"), "oom_kill")
		return ok && n > 0
	}
	dir := c.m.memoryDir(c.paths)
	if n, ok := readKey(filepath.Join(dir, "memory.oom_control"), "oom_kill"); ok {
		return n > 0
	}
	failcnt, err1 := readUint(filepath.Join(dir, "memory.failcnt"))
	lim, err2 := readUint(filepath.Join(dir, "memory.limit_in_bytes"))
	return err1 == nil && err2 == nil && failcnt > 0 && limit(lim) != 0
}

// Delete removes the cgroup. It kills nothing and removes no child cgroup
// (those of another runtime may share a pod's): a cgroup with children is an
// error at once, and one that still holds processes once timeout has passed
// (they may be exiting) is an error then. A cgroup already gone is not an
// error.
func (c *Cgroup) Delete(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, dir := range c.dirs() {
		for {
			err := os.Remove(dir) // rmdir: the kernel refuses while in use
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("delete cgroup %s: %w", dir, err)
			}
			if children := childCgroups(dir); len(children) > 0 {
				return fmt.Errorf("delete cgroup %s: it holds the cgroups %v", dir, children)
			}
			if time.Now().After(deadline) {
				procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
				return fmt.Errorf("delete cgroup %s: it still holds processes %v", dir, strings.Fields(string(procs)))
			}
			time.Sleep(10 * time.Millisecond) // the kernel releases exiting tasks: polled
		}
	}
	return nil
}

// dirs are the cgroup's directories: one per v1 hierarchy, or the v2 one.
func (c *Cgroup) dirs() []string {
	if c.m.mode == V2 {
		return []string{filepath.Join(c.m.unified, c.paths[""])}
	}
	var out []string
	for _, s := range c.m.v1 {
		if p, ok := c.paths[string(s.Name())]; ok {
			out = append(out, hierarchyDir(s, p))
		}
	}
	return out
}

// raiseMemswFirst writes v1's memory+swap limit before a memory limit it
// must stay at least: the kernel refuses a memory limit above it (EINVAL).
// cgroup1's Update means to order the two so when the new memory+swap limit
// is above the current memory limit, but swaps the memory limit with the
// soft limit instead.
func (c *Cgroup) raiseMemswFirst(mem *specs.LinuxMemory) error {
	if mem == nil || mem.Limit == nil || mem.Swap == nil || *mem.Swap <= 0 {
		return nil
	}
	dir := c.m.memoryDir(c.paths)
	current, err := readUint(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil || uint64(*mem.Swap) <= current {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(*mem.Swap, 10)), 0)
}

func childCgroups(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func readUint(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
}

// readKey reads the value of key in a flat keyed file ("key value" lines).
func readKey(path, key string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// podPrefix starts the name of every pod cgroup (PodPaths).
const podPrefix = "pod"

// RemoveOrphans removes the pod cgroups below the runtime's parent whose
// name keep does not claim, with the empty cgroups below them (their
// containers'), in every hierarchy: those of pods their runtime no longer
// knows (a crash, a killed shim or test, a state dir removed), as kubelet's
// cleanup of orphaned pod cgroups does. A pod cgroup that holds a process
// anywhere below it, in any hierarchy, is in use and left whole; so is one
// younger than minAge, which a runtime sharing the parent (tests on one
// host) may be starting a pod in. cgroupfs dates a directory when its inode
// is made, never before the cgroup: the age read is at most the real one.
// Under systemd (SetupSystemd) there is nothing to do: a pod's scope, and
// its cgroups with it, ends with its shim. It returns how many pod cgroups
// it removed.
func (m *Hierarchy) RemoveOrphans(keep func(name string) bool, minAge time.Duration) (int, error) {
	if m.mode == Off || m.systemd != nil {
		return 0, nil
	}
	parents := (&Cgroup{m: m, paths: m.parent}).dirs()
	// Each pod cgroup's directory in every hierarchy, by its name.
	orphans := map[string][]string{}
	var errs []error
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			errs = append(errs, fmt.Errorf("list pod cgroups: %w", err))
			continue
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), podPrefix) && !keep(e.Name()) {
				orphans[e.Name()] = append(orphans[e.Name()], filepath.Join(parent, e.Name()))
			}
		}
	}
	removed := 0
	now := time.Now()
	for _, dirs := range orphans {
		if !idle(dirs, now, minAge) {
			continue
		}
		gone := true
		for _, dir := range dirs {
			if err := removeTree(dir); err != nil {
				errs = append(errs, err)
				gone = false
			}
		}
		if gone {
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// idle reports whether the cgroups at dirs and below hold no process and
// are all at least minAge old.
func idle(dirs []string, now time.Time, minAge time.Duration) bool {
	for _, dir := range dirs {
		busy := false
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if info, err := d.Info(); err != nil || minAge > 0 && now.Sub(info.ModTime()) < minAge {
				busy = true
				return filepath.SkipAll
			}
			if procs, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err != nil || len(procs) > 0 {
				busy = true
				return filepath.SkipAll
			}
			return nil
		})
		if busy || (err != nil && !errors.Is(err, os.ErrNotExist)) {
			return false
		}
	}
	return true
}

// removeTree removes the cgroup at dir and the cgroups below it, deepest
// first. The kernel refuses a cgroup a process has entered since (EBUSY):
// that is an error, and what is left stays for a later try.
func removeTree(dir string) error {
	for _, child := range childCgroups(dir) {
		if err := removeTree(filepath.Join(dir, child)); err != nil {
			return err
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete orphaned cgroup %s: %w", dir, err)
	}
	return nil
}
