package embedded

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// hostEtc holds the user database of containers that run host programs:
// their root is the host's tree.
const hostEtc = "/etc"

// defaultMaskedPaths and defaultReadonlyPaths are containerd's, for a
// container that is not privileged and whose config names none.
var (
	defaultMaskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// containerIsolation translates a container's CRI config into what its init
// applies in its own mount namespace, and the user it runs as with that
// user's home. sandboxDir holds the pod's shm, resolv.conf, hostname and
// hosts, bound in when present. users is the container's user database,
// imageUser its image's USER ("" for host programs), volumeLayers the layer
// dirs of its image volumes by container path (nil: it has none).
func containerIsolation(cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig, sandboxDir string,
	users userDB, imageUser string, volumeLayers func(path string) ([]string, error)) (*shim.Isolation, *shim.User, string, error) {
	sc := cfg.GetLinux().GetSecurityContext()
	usr, home, err := containerUser(sc, imageUser, users)
	if err != nil {
		return nil, nil, "", err
	}
	userns, err := containerUserns(cfg, sb, sandboxDir)
	if err != nil {
		return nil, nil, "", err
	}
	iso := &shim.Isolation{
		ReadonlyRootfs: sc.GetReadonlyRootfs(),
		NoNewPrivs:     sc.GetNoNewPrivs(),
		UserNamespace:  userns,
	}
	if sc.GetPrivileged() {
		all := shim.AllCapabilities()
		iso.Capabilities = shim.Capabilities{Bounding: all, Effective: all, Permitted: all}
		iso.WritableSysfs, iso.DeviceNodes = true, true
	} else {
		if iso.Capabilities, err = containerCapabilities(sc.GetCapabilities()); err != nil {
			return nil, nil, "", err
		}
		iso.MaskedPaths, iso.ReadonlyPaths = sc.GetMaskedPaths(), sc.GetReadonlyPaths()
		// kubelet always names them, and none for procMount Unmasked,
		// which only a pod in a user namespace may ask for: there, what
		// the config names is all (containerd's rule); elsewhere an
		// empty list means the defaults.
		if userns == nil && len(iso.MaskedPaths) == 0 {
			iso.MaskedPaths = defaultMaskedPaths
		}
		if userns == nil && len(iso.ReadonlyPaths) == 0 {
			iso.ReadonlyPaths = defaultReadonlyPaths
		}
	}
	if iso.Mounts, err = containerMounts(cfg, sb, sandboxDir, volumeLayers); err != nil {
		return nil, nil, "", err
	}
	if iso.Devices, _, err = containerDevices(cfg); err != nil {
		return nil, nil, "", err
	}
	return iso, usr, home, nil
}

// containerDevices are the host devices the CRI config asks for (fuse, a
// GPU) and the devices cgroup rules that let the container use them. Each
// host_path must be a device node; permissions are the cgroup's "rwm"
// letters, all three when empty (containerd's default).
func containerDevices(cfg *runtimeapi.ContainerConfig) ([]shim.Device, []cgroups.DeviceRule, error) {
	var devices []shim.Device
	var rules []cgroups.DeviceRule
	for _, d := range cfg.GetDevices() {
		perms := d.GetPermissions()
		if perms == "" {
			perms = "rwm"
		}
		if strings.Trim(perms, "rwm") != "" {
			return nil, nil, fmt.Errorf("device %s: permissions %q: want letters of \"rwm\"", d.GetHostPath(), perms)
		}
		if !filepath.IsAbs(d.GetContainerPath()) {
			return nil, nil, fmt.Errorf("device %s: container path %q is not absolute", d.GetHostPath(), d.GetContainerPath())
		}
		var st unix.Stat_t
		if err := unix.Stat(d.GetHostPath(), &st); err != nil {
			return nil, nil, fmt.Errorf("device %s: %w", d.GetHostPath(), err)
		}
		kind := ""
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			kind = "c"
		case unix.S_IFBLK:
			kind = "b"
		default:
			return nil, nil, fmt.Errorf("device %s is not a device node", d.GetHostPath())
		}
		major, minor := int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		devices = append(devices, shim.Device{HostPath: d.GetHostPath(), ContainerPath: d.GetContainerPath()})
		rules = append(rules, cgroups.DeviceRule{Allow: true, Type: kind, Major: &major, Minor: &minor, Access: perms})
	}
	return devices, rules, nil
}

// userDB reads a container's "passwd" or "group" file: the host's for host
// programs, its image's otherwise. A missing file is nil data, no error.
type userDB func(name string) ([]byte, error)

// containerUser is who the container runs as, as containerd decides it:
// run_as_user or run_as_username, else the image's USER ("name", "uid",
// "name:group", "uid:gid"), else root, names looked up in users; the group
// is run_as_group, else the USER's group, else the user's own (0 for a uid
// not in passwd); the groups are that group, those the group file lists the
// user in (unless the policy is Strict) and supplemental_groups. It returns
// the user's home too ("/" when passwd has none).
func containerUser(sc *runtimeapi.LinuxContainerSecurityContext, imageUser string, users userDB) (*shim.User, string, error) {
	if sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		// containerd's refusal, word for word.
		return nil, "", fmt.Errorf("user group %q is specified without user", strconv.FormatInt(sc.GetRunAsGroup().GetValue(), 10))
	}
	passwd, err := users("passwd")
	if err != nil {
		return nil, "", err
	}
	group, err := users("group")
	if err != nil {
		return nil, "", err
	}
	usr := &shim.User{}
	name := sc.GetRunAsUsername()
	uidSet := sc.GetRunAsUser() != nil
	if uidSet {
		usr.UID = uint32(sc.GetRunAsUser().GetValue())
	}
	var imageGroup *uint32
	if name == "" && !uidSet && imageUser != "" {
		u, g, hasGroup := strings.Cut(imageUser, ":")
		if uid, err := strconv.ParseUint(u, 10, 32); err == nil {
			usr.UID, uidSet = uint32(uid), true
		} else {
			name = u
		}
		if hasGroup {
			gid, err := groupID(group, g)
			if err != nil {
				return nil, "", fmt.Errorf("the image's user %q: %w", imageUser, err)
			}
			imageGroup = &gid
		}
	}
	home := "/"
	if name != "" {
		e := lookupPasswd(passwd, func(e passwdEntry) bool { return e.name == name })
		if e == nil {
			return nil, "", fmt.Errorf("no user %q in /etc/passwd", name)
		}
		usr.UID, usr.GID, home = e.uid, e.gid, e.home
	} else if e := lookupPasswd(passwd, func(e passwdEntry) bool { return e.uid == usr.UID }); e != nil {
		name, usr.GID, home = e.name, e.gid, e.home
	}
	if home == "" {
		home = "/"
	}
	if imageGroup != nil {
		usr.GID = *imageGroup
	}
	if g := sc.GetRunAsGroup(); g != nil {
		usr.GID = uint32(g.GetValue())
	}
	groups := []uint32{usr.GID}
	if name != "" && sc.GetSupplementalGroupsPolicy() != runtimeapi.SupplementalGroupsPolicy_Strict {
		groups = append(groups, memberGroups(group, name)...)
	}
	for _, g := range sc.GetSupplementalGroups() {
		groups = append(groups, uint32(g))
	}
	for _, g := range groups {
		if !slices.Contains(usr.Groups, g) {
			usr.Groups = append(usr.Groups, g)
		}
	}
	return usr, home, nil
}

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

// lookupPasswd returns the first entry of the passwd file that match
// accepts, or nil.
func lookupPasswd(passwd []byte, match func(passwdEntry) bool) *passwdEntry {
	var found *passwdEntry
	scanColonFile(passwd, func(f []string) bool {
		if len(f) < 4 {
			return true
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return true
		}
		e := passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid)}
		if len(f) > 5 {
			e.home = f[5]
		}
		if match(e) {
			found = &e
			return false
		}
		return true
	})
	return found
}

// groupID is the gid a group names: a number, or a name in the group file.
func groupID(group []byte, g string) (uint32, error) {
	if gid, err := strconv.ParseUint(g, 10, 32); err == nil {
		return uint32(gid), nil
	}
	var gid *uint32
	scanColonFile(group, func(f []string) bool {
		if len(f) < 3 || f[0] != g {
			return true
		}
		if v, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			id := uint32(v)
			gid = &id
			return false
		}
		return true
	})
	if gid == nil {
		return 0, fmt.Errorf("no group %q in /etc/group", g)
	}
	return *gid, nil
}

// memberGroups returns the groups the group file lists user as a member of.
func memberGroups(group []byte, user string) []uint32 {
	var gids []uint32
	scanColonFile(group, func(f []string) bool {
		if len(f) < 4 || !slices.Contains(strings.Split(f[3], ","), user) {
			return true
		}
		if gid, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			gids = append(gids, uint32(gid))
		}
		return true
	})
	return gids
}

// scanColonFile calls line with the fields of each entry of a passwd-style
// file until it returns false.
func scanColonFile(data []byte, line func([]string) bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !line(strings.Split(l, ":")) {
			return
		}
	}
}

// containerCapabilities applies the CRI's add and drop lists to containerd's
// defaults: "ALL" first (add: every capability; drop: none left), then each
// name, with or without its CAP_ prefix. Ambient capabilities are added to
// every set, so that a user other than root keeps them across exec.
func containerCapabilities(c *runtimeapi.Capability) (shim.Capabilities, error) {
	set := shim.DefaultCapabilities()
	if containsFold(c.GetAddCapabilities(), "ALL") {
		set = shim.AllCapabilities()
	}
	if containsFold(c.GetDropCapabilities(), "ALL") {
		set = nil
	}
	add, err := capabilityNames(c.GetAddCapabilities())
	if err != nil {
		return shim.Capabilities{}, err
	}
	drop, err := capabilityNames(c.GetDropCapabilities())
	if err != nil {
		return shim.Capabilities{}, err
	}
	ambient, err := capabilityNames(c.GetAddAmbientCapabilities())
	if err != nil {
		return shim.Capabilities{}, err
	}
	for _, name := range append(add, ambient...) {
		if !slices.Contains(set, name) {
			set = append(set, name)
		}
	}
	set = slices.DeleteFunc(set, func(name string) bool { return slices.Contains(drop, name) })
	return shim.Capabilities{
		Bounding: set, Effective: set, Permitted: set,
		Inheritable: ambient, Ambient: ambient,
	}, nil
}

// capabilityNames canonicalises names ("chown", "CAP_CHOWN" -> "CAP_CHOWN"),
// leaving out "ALL" and refusing unknown ones.
func capabilityNames(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if strings.EqualFold(n, "ALL") {
			continue
		}
		name := strings.ToUpper(n)
		if !strings.HasPrefix(name, "CAP_") {
			name = "CAP_" + name
		}
		if !shim.IsCapability(name) {
			return nil, fmt.Errorf("unknown capability %q", n)
		}
		out = append(out, name)
	}
	return out, nil
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(v string) bool { return strings.EqualFold(v, s) })
}

// containerMounts are the CRI's mounts (an image volume's layers from
// volumeLayers) and the pod's /dev/shm, resolv.conf, hostname and hosts
// where the CRI mounts nothing there, parents before children.
func containerMounts(cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig, sandboxDir string,
	volumeLayers func(path string) ([]string, error)) ([]shim.Mount, error) {
	var mounts []shim.Mount
	for _, m := range cfg.GetMounts() {
		if !filepath.IsAbs(m.GetContainerPath()) {
			return nil, fmt.Errorf("mount container path %q is not absolute", m.GetContainerPath())
		}
		if m.GetImage().GetImage() != "" {
			if volumeLayers == nil {
				return nil, fmt.Errorf("mount %s is an image volume: a runtime of host programs has no images to mount", m.GetContainerPath())
			}
			dst := filepath.Clean(m.GetContainerPath())
			layers, err := volumeLayers(dst)
			if err != nil {
				return nil, err
			}
			mounts = append(mounts, shim.Mount{Type: "image", Layers: layers, SubPath: m.GetImageSubPath(), Destination: dst, ReadOnly: true})
			continue
		}
		if m.GetHostPath() == "" {
			return nil, fmt.Errorf("mount %s has no host path", m.GetContainerPath())
		}
		propagation := "rprivate"
		switch m.GetPropagation() {
		case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
			propagation = "rslave"
		case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
			propagation = "rshared"
		}
		mounts = append(mounts, shim.Mount{
			Source: m.GetHostPath(), Destination: filepath.Clean(m.GetContainerPath()),
			ReadOnly: m.GetReadonly(), Propagation: propagation,
		})
	}
	mounted := func(dst string) bool {
		return slices.ContainsFunc(mounts, func(m shim.Mount) bool { return m.Destination == dst })
	}
	readonly := cfg.GetLinux().GetSecurityContext().GetReadonlyRootfs()
	var pod []shim.Mount
	if !mounted("/dev/shm") {
		shm := shim.Mount{Source: filepath.Join(sandboxDir, "shm"), Destination: "/dev/shm", PodOwned: true}
		if sb.GetLinux().GetSecurityContext().GetNamespaceOptions().GetIpc() == runtimeapi.NamespaceMode_NODE {
			shm = shim.Mount{Source: "/dev/shm", Destination: "/dev/shm"} // hostIPC: the host's
		}
		pod = append(pod, shm)
	}
	for _, f := range []string{"resolv.conf", "hostname", "hosts"} {
		dst := "/etc/" + f
		src := filepath.Join(sandboxDir, f)
		if _, err := os.Stat(src); err != nil || mounted(dst) {
			continue
		}
		pod = append(pod, shim.Mount{Source: src, Destination: dst, ReadOnly: readonly})
	}
	mounts = append(pod, mounts...)
	// A mount's parent first, whatever the order asked: /a before /a/b.
	slices.SortStableFunc(mounts, func(a, b shim.Mount) int {
		return strings.Count(a.Destination, "/") - strings.Count(b.Destination, "/")
	})
	return mounts, nil
}
