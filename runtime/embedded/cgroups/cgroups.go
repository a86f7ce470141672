// Package cgroups puts the embedded runtime's pods and containers in cgroups:
// it creates them from CRI resources, updates them live, reads their usage and
// whether the kernel OOM-killed in them, and removes them. It writes no pid
// itself: the pod shim writes each container's pid to ProcsFiles before it
// executes the command. cgroup v1 (and hybrid hosts, through their v1
// controllers) and v2 are handled by github.com/containerd/cgroups/v3.
package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	cgroupsv3 "github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	systemd "github.com/coreos/go-systemd/v22/dbus"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/systemdbus"
)

// Mode is the cgroup version in use.
type Mode int

const (
	// Off: no cgroups are made (not root, no cgroup filesystem, or the
	// runtime's own cgroup cannot be delegated from).
	Off Mode = iota
	// V1 uses the v1 hierarchies (also on hybrid hosts).
	V1
	// V2 uses the unified hierarchy.
	V2
)

func (m Mode) String() string {
	switch m {
	case V1:
		return "v1"
	case V2:
		return "v2"
	default:
		return "off"
	}
}

// unifiedRoot is where the v2 hierarchy is mounted on a v2 host.
const unifiedRoot = "/sys/fs/cgroup"

// v1Controllers are the v1 hierarchies the runtime uses: those that limit or
// account CPU, memory, pids and huge pages, and devices. Freezer, blkio and
// the named hierarchies are left alone.
var v1Controllers = map[cgroup1.Name]bool{
	cgroup1.Cpu: true, cgroup1.Cpuacct: true, cgroup1.Cpuset: true,
	cgroup1.Memory: true, cgroup1.Pids: true, cgroup1.Hugetlb: true,
	cgroup1.Devices: true,
}

// DeviceRule is one device access rule of a devices cgroup. Every field is
// set: Type "a" for any type, Major or Minor Wildcard for any number. v1
// writes a nil number as "*", but v2's eBPF filter (cgroup2.DeviceFilter)
// dereferences both and rejects an empty Type.
type DeviceRule = specs.LinuxDeviceCgroup

// Wildcard is a DeviceRule's Major or Minor that matches any number.
const Wildcard int64 = -1

// denyAllDevices comes first in a cgroup's rules: only those after it allow.
var denyAllDevices = DeviceRule{Allow: false, Type: "a", Major: ptr(Wildcard), Minor: ptr(Wildcard), Access: "rwm"}

// DefaultDevices are the devices every container may use, runc's list: it
// may create any device node (m), and read and write only null, zero, full,
// random, urandom, tty, console, ptmx and its pseudo-terminals.
var DefaultDevices = []DeviceRule{
	{Allow: true, Type: "c", Major: ptr(Wildcard), Minor: ptr(Wildcard), Access: "m"},
	{Allow: true, Type: "b", Major: ptr(Wildcard), Minor: ptr(Wildcard), Access: "m"},
	charDevice(1, 3), charDevice(1, 5), charDevice(1, 7), charDevice(1, 8), charDevice(1, 9),
	charDevice(5, 0), charDevice(5, 1), charDevice(5, 2),
	charDevice(136, Wildcard), // /dev/pts/*
}

func charDevice(major, minor int64) DeviceRule {
	return DeviceRule{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"}
}

func ptr[T any](v T) *T { return &v }

// Paths locate one cgroup: under v1, its path below each hierarchy's root,
// by controller name; under v2, its path below the unified root, under the
// key "". Paths are what a runtime records to find its cgroups again.
type Paths map[string]string

// Hierarchy is the part of the host's cgroup hierarchy (each of them, under
// v1) that one runtime owns: the version in use, the runtime's parent cgroup,
// and below it the cgroups it makes (Create, Load). It is read-only after
// Setup and safe for concurrent use.
type Hierarchy struct {
	mode   Mode
	reason string              // why mode is Off
	parent Paths               // the runtime's parent cgroup
	swap   bool                // the kernel accounts swap
	v1     []cgroup1.Subsystem // the v1 hierarchies in use
	// unified is the v2 hierarchy's mount point.
	unified string
	// controllers (v2) are enabled above every cgroup the runtime makes:
	// its usage and pids.current are read whether or not a limit is set.
	controllers []string
	// systemd, on a host whose init is systemd (v2), puts each pod shim in
	// a delegated scope of its own (StartPodScope), as runc's systemd
	// driver does for a container: the pods live outside the runtime's
	// unit, whose cgroup then hands no controllers down, so that systemd
	// (before 254's DelegateSubgroup=) can start the unit again while they
	// run. Nil elsewhere: the pods are below the runtime's own cgroup.
	systemd *systemd.Conn
}

// ErrNotDelegated is Setup's refusal: on a v2 host the runtime's own cgroup
// is not its to write below (read-only).
var ErrNotDelegated = errors.New("the runtime's cgroup is not delegated to it")

// Setup detects the cgroup mode and creates the runtime's parent cgroup,
// <its own cgroup>/<name> in each hierarchy, so that the runtime stays inside
// whatever subtree it was delegated. When that fails, the Hierarchy is Off and
// Enabled says why; nothing else changes. On a v2 host whose cgroup is not
// delegated to the runtime it returns an error wrapping ErrNotDelegated
// instead, having changed nothing: pods would fail there later.
func Setup(name string) (*Hierarchy, error) {
	if os.Geteuid() != 0 {
		return off("not running as root"), nil
	}
	switch cgroupsv3.Mode() {
	case cgroupsv3.Unavailable:
		return off("no cgroup filesystem at " + unifiedRoot), nil
	case cgroupsv3.Unified:
		return setupV2(name)
	default:
		return setupV1(cgroup1.NestedPath(name), true), nil
	}
}

// Root is the host's whole hierarchy, for cgroups at paths below the
// controllers' roots (kubelet's pod cgroups on a CRI runtime, made by jetlet
// and filled by that runtime): detected as Setup does, with the root as
// parent, creating nothing; on v2 the controllers of the roots' children are
// enabled.
func Root() *Hierarchy {
	if os.Geteuid() != 0 {
		return off("not running as root")
	}
	switch cgroupsv3.Mode() {
	case cgroupsv3.Unavailable:
		return off("no cgroup filesystem at " + unifiedRoot)
	case cgroupsv3.Unified:
		avail, err := readControllers(filepath.Join(unifiedRoot, "cgroup.controllers"))
		if err != nil {
			return off(err.Error())
		}
		want := available(avail)
		if err := enableV2("/", want); err != nil {
			return off(err.Error())
		}
		return &Hierarchy{mode: V2, parent: Paths{"": "/"}, unified: unifiedRoot, controllers: want}
	default:
		return setupV1(cgroup1.StaticPath("/"), false)
	}
}

func off(reason string) *Hierarchy { return &Hierarchy{mode: Off, reason: reason} }

// Enabled reports whether cgroups are made and, when not, why.
func (m *Hierarchy) Enabled() (bool, string) { return m.mode != Off, m.reason }

// Mode is the cgroup version in use.
func (m *Hierarchy) Mode() Mode { return m.mode }

// setupV1 uses the v1 hierarchies with the runtime's parent at own,
// created when create is set.
func setupV1(own cgroup1.Path, create bool) *Hierarchy {
	all, err := cgroup1.Default()
	if err != nil {
		return off(fmt.Sprintf("list cgroup v1 hierarchies: %v", err))
	}
	m := &Hierarchy{mode: V1, parent: Paths{}}
	for _, s := range all {
		if !v1Controllers[s.Name()] {
			continue
		}
		p, err := own(s.Name())
		if err != nil {
			continue // not in this process's /proc/self/cgroup
		}
		if s.Name() == cgroup1.Memory {
			// Stats must not fail where swap is not accounted.
			root := filepath.Dir(hierarchyDir(s, "/"))
			s = cgroup1.NewMemory(root, cgroup1.OptionalSwap())
			_, err := os.Stat(filepath.Join(hierarchyDir(s, "/"), "memory.memsw.limit_in_bytes"))
			m.swap = err == nil
		}
		m.v1 = append(m.v1, s)
		m.parent[string(s.Name())] = p
	}
	if _, ok := m.parent[string(cgroup1.Memory)]; !ok {
		return off("no cgroup v1 memory hierarchy")
	}
	if !create {
		return m
	}
	if _, err := cgroup1.New(m.v1Path(m.parent), &specs.LinuxResources{}, m.v1Opts()...); err != nil {
		return off(fmt.Sprintf("create cgroup %s: %v", m.parent[string(cgroup1.Memory)], err))
	}
	return m
}

// hierarchyDir is the directory of the cgroup at path in s's hierarchy.
func hierarchyDir(s cgroup1.Subsystem, path string) string {
	return s.(interface{ Path(string) string }).Path(path)
}

func (m *Hierarchy) v1Opts() []cgroup1.InitOpts {
	subs := m.v1
	return []cgroup1.InitOpts{
		cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subs, nil }),
		func(c *cgroup1.InitConfig) error { c.InitCheck = cgroup1.AllowAny; return nil },
	}
}

// v1Path is the library's view of paths.
func (m *Hierarchy) v1Path(paths Paths) cgroup1.Path {
	return func(n cgroup1.Name) (string, error) {
		p, ok := paths[string(n)]
		if !ok {
			return "", cgroup1.ErrControllerNotActive
		}
		return p, nil
	}
}

// v2Controllers are enabled for the runtime's subtree.
var v2Controllers = []string{"cpu", "cpuset", "memory", "pids", "hugetlb"}

// podSlice holds the pods' scopes on a systemd host: /jetlet.slice.
const podSlice = "jetlet.slice"

// systemdControllers are the v2Controllers systemd 252 delegates to a scope
// (hugetlb it does not manage: enabling it in its slice would be undone).
var systemdControllers = []string{"cpu", "cpuset", "memory", "pids"}

// SetupSystemd is Setup on a cgroup v2 host whose init is systemd
// (Systemd): the parent is podSlice, each pod in a scope of its own there
// (PodScope, StartPodScope), made through systemd's D-Bus API, whose
// absence is an error. The runtime's own cgroup is left alone.
func SetupSystemd() (*Hierarchy, error) {
	if os.Geteuid() != 0 {
		return off("not running as root"), nil
	}
	avail, err := readControllers(filepath.Join(unifiedRoot, "cgroup.controllers"))
	if err != nil {
		return off(err.Error()), nil
	}
	if !avail["memory"] {
		return off("no memory controller in " + unifiedRoot), nil
	}
	// The connection lives as long as its context: the Hierarchy's.
	conn, err := systemdbus.Dial(context.Background())
	if err != nil {
		return nil, fmt.Errorf("systemd is this host's init and the embedded runtime puts each pod in a scope of its own, made through systemd: %w", err)
	}
	var want []string
	for _, c := range systemdControllers {
		if avail[c] {
			want = append(want, c)
		}
	}
	// Kernel-wide: a unit's memory.swap.max is there when swap is accounted.
	_, err = os.Stat(filepath.Join(unifiedRoot, "system.slice", "memory.swap.max"))
	return &Hierarchy{mode: V2, parent: Paths{"": "/" + podSlice}, unified: unifiedRoot, controllers: want, swap: err == nil, systemd: conn}, nil
}

// Close lets go of systemd's connection, if any.
func (m *Hierarchy) Close() {
	if m.systemd != nil {
		m.systemd.Close()
	}
}

// PodScope is the cgroup of the scope of pod sandbox id: the parent of its
// pod cgroup (PodPaths), made by StartPodScope; "" when pods get no scope.
func (m *Hierarchy) PodScope(id string) string {
	if m.systemd == nil {
		return ""
	}
	return "/" + podSlice + "/" + scopeUnit(id)
}

func scopeUnit(id string) string { return "jetlet-pod-" + id + ".scope" }

// shimLeaf is the cgroup of a pod's scope that its shim moves to, so that
// the scope can hand the controllers down to the pod's cgroup.
const shimLeaf = "shim"

// StartPodScope puts pid, the shim of pod sandbox id, in a transient scope
// with Delegate=yes under podSlice (runc's systemd driver's properties),
// then in its leaf cgroup shim. The scope ends with the last process below
// it, and systemd removes its cgroups then.
func (m *Hierarchy) StartPodScope(ctx context.Context, id string, pid int) error {
	unit := scopeUnit(id)
	props := []systemd.Property{
		systemd.PropDescription("jetlet pod shim of sandbox " + id),
		systemd.PropSlice(podSlice),
		systemd.PropPids(uint32(pid)),
		systemdbus.Prop("Delegate", true),
		systemdbus.Prop("DefaultDependencies", false),
	}
	done := make(chan string, 1)
	if _, err := m.systemd.StartTransientUnitContext(ctx, unit, "replace", props, done); err != nil {
		return fmt.Errorf("systemd: start %s: %w", unit, err)
	}
	if err := systemdbus.WaitJob(ctx, "start", unit, done); err != nil {
		return err
	}
	leaf := filepath.Join(m.unified, m.PodScope(id), shimLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
		return fmt.Errorf("move pod shim %d to cgroup %s: %w", pid, leaf, err)
	}
	return nil
}

func setupV2(name string) (*Hierarchy, error) {
	own, err := cgroup2.NestedGroupPath("")
	if err != nil {
		return off(fmt.Sprintf("read own cgroup: %v", err)), nil
	}
	if path.Base(own) == runtimeLeaf {
		// Moved there by an earlier Setup of this process: its cgroup is
		// the leaf's parent (or every Setup would nest one more leaf).
		own = path.Dir(own)
	}
	if err := checkDelegated(unifiedRoot, own); err != nil {
		return nil, err
	}
	avail, err := readControllers(filepath.Join(unifiedRoot, own, "cgroup.controllers"))
	if err != nil {
		return off(fmt.Sprintf("own cgroup %s: %v", own, err)), nil
	}
	want := available(avail)
	if !avail["memory"] {
		return off(fmt.Sprintf("the memory controller is not delegated to cgroup %s", own)), nil
	}
	if err := enableV2(own, want); err != nil {
		return off(err.Error()), nil
	}
	m := &Hierarchy{mode: V2, parent: Paths{"": filepath.Join(own, name)}, unified: unifiedRoot, controllers: want}
	if _, err := cgroup2.NewManager(m.unified, m.parent[""], &cgroup2.Resources{}); err != nil {
		return off(fmt.Sprintf("create cgroup %s: %v", m.parent[""], err)), nil
	}
	_, err = os.Stat(filepath.Join(m.unified, m.parent[""], "memory.swap.max"))
	m.swap = err == nil
	return m, nil
}

// Systemd reports whether the host's cgroups are v2 and its init systemd,
// the owner of the tree: SetupSystemd's hosts.
func Systemd() bool { return cgroupsv3.Mode() == cgroupsv3.Unified && systemdBooted() }

// systemdBooted reports whether systemd is the host's init, and so the
// owner of the cgroup tree (sd_booted's test).
func systemdBooted() bool {
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

// checkDelegated returns an error wrapping ErrNotDelegated unless the v2
// cgroup own (below the hierarchy mounted at unified) is writable: the
// runtime's to write below. (On a systemd host the runtime makes nothing
// below its own cgroup: SetupSystemd.)
func checkDelegated(unified, own string) error {
	dir := filepath.Join(unified, own)
	for _, f := range []string{"cgroup.procs", "cgroup.subtree_control"} {
		if err := unix.Access(filepath.Join(dir, f), unix.W_OK); err != nil {
			return fmt.Errorf("%w: cannot write %s: %v", ErrNotDelegated, filepath.Join(dir, f), err)
		}
	}
	return nil
}

// available are the v2Controllers among avail.
func available(avail map[string]bool) []string {
	var want []string
	for _, c := range v2Controllers {
		if avail[c] {
			want = append(want, c)
		}
	}
	return want
}

// runtimeLeaf is the v2 cgroup the runtime moves itself to (enableV2).
const runtimeLeaf = "jetlet-runtime"

// enableV2 enables controllers for the children of own. A cgroup other than
// the root cannot both hold processes and hand controllers down, so when this
// process sits in own (a systemd unit with Delegate=yes, say) it first moves
// itself to the leaf own/jetlet-runtime, as k3s and kind's entrypoint do.
func enableV2(own string, controllers []string) error {
	if len(controllers) == 0 {
		return nil
	}
	control := filepath.Join(unifiedRoot, own, "cgroup.subtree_control")
	line := []byte("+" + strings.Join(controllers, " +"))
	err := os.WriteFile(control, line, 0)
	if err == nil || own == "/" || !errors.Is(err, syscall.EBUSY) {
		if err != nil {
			return fmt.Errorf("enable controllers in cgroup %s: %w", own, err)
		}
		return nil
	}
	leaf := filepath.Join(unifiedRoot, own, runtimeLeaf)
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
		return fmt.Errorf("move the runtime to cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(control, line, 0); err != nil {
		return fmt.Errorf("enable controllers in cgroup %s (other processes share it; run jetlet in a cgroup of its own): %w", own, err)
	}
	return nil
}

func readControllers(path string) (map[string]bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, c := range strings.Fields(string(data)) {
		out[c] = true
	}
	return out, nil
}

// PodPaths are where the cgroup of pod uid goes: under parent (a path below
// the controllers' roots, the sandbox's cgroup_parent) when set, else under
// the runtime's parent. Neither can name a place outside the roots.
func (m *Hierarchy) PodPaths(parent, uid string) Paths {
	out := Paths{}
	name := podPrefix + strings.ReplaceAll(uid, "/", "_")
	for k, p := range m.parent {
		if parent != "" {
			p = filepath.Join("/", parent)
		}
		out[k] = filepath.Join(p, name)
	}
	return out
}

// Child is where a child named name of the cgroup at paths goes.
func Child(paths Paths, name string) Paths {
	out := Paths{}
	for k, p := range paths {
		out[k] = filepath.Join(p, name)
	}
	return out
}

// PathsOf are the paths of the cgroup at path below the controllers' roots.
func (m *Hierarchy) PathsOf(path string) Paths {
	out := Paths{}
	for k := range m.parent {
		out[k] = path
	}
	return out
}

// Dir is the directory of the cgroup at paths: in the memory hierarchy on
// v1, the unified one on v2.
func (m *Hierarchy) Dir(paths Paths) string {
	if m.mode == V2 {
		return filepath.Join(m.unified, paths[""])
	}
	return m.memoryDir(paths)
}
