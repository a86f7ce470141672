package shim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/safepath"
)

// setUpMountNamespace builds the container's root in this process's new mount
// namespace and makes it the root:
//
//   - its image (iso.Rootfs) under an overlay whose upper layer is the
//     container's own; or, for a runtime of host programs, the host tree,
//     each of its file systems under an overlay whose upper layer is a tmpfs
//     living in this namespace only (writes vanish with the container; a unix
//     socket of the host is a file there, not the socket), iso.HiddenPaths
//     emptied and a private /tmp;
//   - the pod's /proc, a read-only /sys, a /dev of the default devices and
//     iso.Devices;
//   - iso.Mounts, then the masked and read-only paths.
//
// With u (the pod's user namespace), the image's layers and the volumes are
// idmapped to it, what the init makes for the container is owned by the
// pod's root, and the root is made the working directory instead: the
// init enters the namespace before it pivots (see pivotRootHere).
func setUpMountNamespace(dir string, iso *Isolation, cgroupProcs []string, u *podUserns) error {
	clones, err := cloneSharedVolumes(iso.Mounts)
	if err != nil {
		return err
	}
	// Then: nothing mounted from here on reaches the host (nor the pod's
	// other containers), while mounts of the host still propagate in.
	if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make the host's mounts slaves: %w", err)
	}
	// The host's mount points the root is made of: /sys's for an image's
	// root (mountKernelFS), every one for the host tree.
	var hostMounts []string
	if iso.Rootfs != nil {
		hostMounts, err = mountPointsUnder("/sys")
	} else {
		hostMounts, err = readMountPoints()
	}
	if err != nil {
		return err
	}
	var root string
	var layers []string // the root's writable mounts, made read-only last for a read-only root
	if iso.Rootfs != nil {
		root = filepath.Join(dir, "rootfs")
		if err := mountImageRoot(root, iso.Rootfs, iso.DeviceNodes, u, filepath.Join(dir, "idmapped-layers")); err != nil {
			return err
		}
		layers = []string{root}
	} else {
		if root, layers, err = overlayHostTree(filepath.Join(dir, "rootfs"), hostMounts, dir); err != nil {
			return err
		}
	}
	r, err := openContainerRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	if iso.Rootfs == nil {
		hidden, err := hidePaths(r, iso.HiddenPaths)
		if err != nil {
			return err
		}
		layers = append(layers, hidden...)
		var tmpFlags uintptr = unix.MS_NOSUID | unix.MS_NODEV
		if iso.ReadonlyRootfs {
			tmpFlags |= unix.MS_RDONLY
		}
		if err := unix.Mount("tmpfs", filepath.Join(root, "tmp"), "tmpfs", tmpFlags, "mode=1777"); err != nil {
			return fmt.Errorf("mount /tmp: %w", err)
		}
	}
	if err := mountKernelFS(r, hostMounts, iso, cgroupProcs); err != nil {
		return err
	}
	if err := mountDev(r, iso.Devices, iso.DeviceNodes, u); err != nil {
		return err
	}
	for i, m := range iso.Mounts {
		if m.Type == "image" {
			err = mountImageVolume(r, m, filepath.Join(dir, "image-volumes", strconv.Itoa(i)), u)
		} else {
			err = mountVolume(r, m, clones[i], u)
		}
		if err != nil {
			return fmt.Errorf("mount %s: %w", m.Destination, err)
		}
	}
	if err := maskPaths(r, iso.MaskedPaths); err != nil {
		return err
	}
	for _, p := range iso.ReadonlyPaths {
		if err := readonlyPath(r, p); err != nil {
			return fmt.Errorf("read-only path %s: %w", p, err)
		}
	}
	if iso.ReadonlyRootfs {
		// Last: mount points above were made in these layers.
		for _, l := range layers {
			err := remountReadOnly(l)
			if errors.Is(err, unix.ENOENT) {
				continue // a host file system under a hidden path: covered, out of sight
			}
			if err != nil {
				return fmt.Errorf("read-only root: %w", err)
			}
		}
	}
	if u != nil {
		return unix.Chdir(root)
	}
	return pivotRoot(root)
}

// overlayHostTree mounts a tmpfs on base and, on base/root, the host's root
// file system under an overlay whose upper and work dirs are on that tmpfs;
// then each other host file system (but /proc, /sys, /dev, /tmp and those
// under skipDir) likewise at its place in base/root. It returns base/root and
// the overlays' mount points, root first.
//
// An overlay, not a bind: a bind shows the host's unix sockets, which answer
// a connect (containerd's, docker's, anything under a separately mounted
// /run), while the overlay's copy of a socket is an inode no listener holds.
// A file system that cannot be an overlay's lower layer (a namespace file,
// autofs) is left out, its mount point empty. Device nodes on the host's file
// systems never open (nodev): the container's devices are those of its /dev.
func overlayHostTree(base string, hostMounts []string, skipDir string) (root string, layers []string, err error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", nil, err
	}
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=700"); err != nil {
		return "", nil, fmt.Errorf("mount the root's tmpfs: %w", err)
	}
	root = filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", nil, err
	}
	if err := mountOverlay(base, 0, "/", root); err != nil {
		return "", nil, fmt.Errorf("mount the root overlay: %w", err)
	}
	layers = []string{root}
	for i, mp := range hostMounts {
		if mp == "/" || under(mp, skipDir) || under(mp, "/proc") || under(mp, "/sys") || under(mp, "/dev") || under(mp, "/tmp") {
			continue
		}
		dst := filepath.Join(root, mp)
		err := mountOverlay(base, i+1, mp, dst)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EINVAL) {
			continue // gone since, hidden under a later mount, not a directory, or not a file system overlayfs takes
		}
		if err != nil {
			return "", nil, fmt.Errorf("host mount %s: %w", mp, err)
		}
		layers = append(layers, dst)
	}
	return root, layers, nil
}

// mountImageRoot mounts on root the image's layers under an overlay whose
// upper and work dirs are the container's (rootfs.Upper, rootfs.Work), or,
// with rootfs.Copy, a copy of them in the upper dir. It is nodev unless
// devNodes: a device node made in it does not open. With u, the layers are
// idmapped copies mounted under idmappedDir, and the root directory is
// owned by the host's ids of its owner in the image: what the container
// writes is owned by its users' host ids, as with containerd's idmapped
// snapshots.
func mountImageRoot(root string, rootfs *Rootfs, devNodes bool, u *podUserns, idmappedDir string) error {
	if len(rootfs.Layers) == 0 {
		return errors.New("the image has no layers")
	}
	if u != nil && rootfs.Copy {
		return errors.New("a pod in a user namespace needs overlayfs for its containers' roots, which this runtime's state dir cannot hold")
	}
	for _, d := range []string{root, filepath.Dir(rootfs.Upper), rootfs.Work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// The root directory the container sees is its upper dir's: made at the
	// first start with the image's mode and owner (a user other than root
	// must be able to enter /), kept as the container changed it after.
	if err := os.Mkdir(rootfs.Upper, 0o700); err == nil {
		var st unix.Stat_t
		if err := unix.Stat(rootfs.Layers[0], &st); err != nil {
			return err
		}
		if err := unix.Chmod(rootfs.Upper, st.Mode&0o7777); err != nil {
			return err
		}
		uid, gid := int(st.Uid), int(st.Gid)
		if u != nil {
			if uid, gid, err = u.hostOwner(st.Uid, st.Gid); err != nil {
				return fmt.Errorf("the image's root directory: %w", err)
			}
		}
		if err := os.Lchown(rootfs.Upper, uid, gid); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	var flags uintptr
	if !devNodes {
		flags |= unix.MS_NODEV
	}
	if rootfs.Copy {
		if err := copyImageRoot(root, rootfs, flags); err != nil {
			return fmt.Errorf("copy the image's root: %w", err)
		}
		return nil
	}
	layers := rootfs.Layers
	if u != nil {
		var err error
		if layers, err = u.idmapLayers(layers, idmappedDir); err != nil {
			return fmt.Errorf("the image's layers: %w", err)
		}
	}
	opts := ",upperdir=" + rootfs.Upper + ",workdir=" + rootfs.Work
	if err := mountLayers(layers, opts, root, flags); err != nil {
		return fmt.Errorf("mount the image's root: %w", err)
	}
	return nil
}

// mountLayers mounts on dst an overlay of layers (top first) with the
// further options opts. The layers are named relative to their common
// parent, made the working directory for the mount: mount options are
// limited to a page, and an image of many layers would pass it with
// absolute paths.
func mountLayers(layers []string, opts, dst string, flags uintptr) error {
	parent := filepath.Dir(layers[0])
	names := make([]string, len(layers))
	for i, l := range layers {
		if filepath.Dir(l) != parent {
			parent = ""
			break
		}
		names[i] = filepath.Base(l)
	}
	if parent == "" {
		copy(names, layers)
	} else {
		cwd, err := os.Getwd()
		if err != nil {
			return err
		}
		if err := unix.Chdir(parent); err != nil {
			return err
		}
		defer unix.Chdir(cwd) //nolint:errcheck // back where it was; the root changes next anyway
	}
	return unix.Mount("overlay", dst, "overlay", flags, "lowerdir="+strings.Join(names, ":")+opts)
}

// mountOverlay mounts on dst an overlay of the host directory lower with an
// upper and a work dir numbered n on base's tmpfs. The upper dir takes
// lower's mode and owner, which the overlay's root shows; the mount keeps
// lower's nosuid and noexec, and is always nodev.
func mountOverlay(base string, n int, lower, dst string) error {
	if _, err := os.Stat(dst); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(lower, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.ENOTDIR
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(lower, &fs); err != nil {
		return err
	}
	upper, work := filepath.Join(base, "upper", strconv.Itoa(n)), filepath.Join(base, "work", strconv.Itoa(n))
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := unix.Chmod(upper, st.Mode&0o7777); err != nil { // setuid, setgid and sticky bits too
		return err
	}
	if err := os.Lchown(upper, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	flags := uintptr(unix.MS_NODEV)
	if fs.Flags&unix.ST_NOSUID != 0 {
		flags |= unix.MS_NOSUID
	}
	if fs.Flags&unix.ST_NOEXEC != 0 {
		flags |= unix.MS_NOEXEC
	}
	return unix.Mount("overlay", dst, "overlay", flags, "lowerdir="+lower+",upperdir="+upper+",workdir="+work)
}

// hidePaths empties each path of the host that exists in root: a directory
// becomes an empty tmpfs with the directory's mode and owner (writable, as a
// fresh directory of the container's own would be), anything else /dev/null.
// It is how the host's secrets stay out of a container whose root is the
// host's tree. It returns the tmpfs mount points.
func hidePaths(r *containerRoot, paths []string) (tmpfs []string, err error) {
	null, err := openDevNull()
	if err != nil {
		return nil, err
	}
	defer null.Close()
	for _, p := range paths {
		if tmpfs, err = hidePath(r, p, null, tmpfs); err != nil {
			return nil, fmt.Errorf("hidden path %s: %w", p, err)
		}
	}
	return tmpfs, nil
}

// hidePath empties p in r (see hidePaths), appending its tmpfs to tmpfs.
func hidePath(r *containerRoot, p string, null *os.File, tmpfs []string) ([]string, error) {
	dst, err := r.open(p, followLinks)
	if dst == nil || err != nil {
		return tmpfs, err
	}
	defer dst.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(dst.Fd()), &st); err != nil {
		return tmpfs, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return tmpfs, r.bindIn(null, dst, p, followLinks, 0, true)
	}
	opts := fmt.Sprintf("mode=%o,uid=%d,gid=%d", st.Mode&0o7777, st.Uid, st.Gid)
	if err := unix.Mount("tmpfs", fdPath(dst), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return tmpfs, err
	}
	real, err := os.Readlink(fdPath(dst))
	return append(tmpfs, real), err
}

// mountKernelFS mounts the pod's /proc and binds the host's /sys tree,
// read-only unless iso.WritableSysfs, each cgroup hierarchy in it as the
// container's own cgroup there (cgroupview.go).
// Their mount points are real directories of the root, never symbolic links
// (an image's /proc linked elsewhere is runc's CVE-2019-16884), made when
// the image lacks them.
func mountKernelFS(r *containerRoot, hostMounts []string, iso *Isolation, cgroupProcs []string) error {
	proc, err := r.mountPoint("proc", noLinks, true)
	if err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	defer proc.Close()
	if err := unix.Mount("proc", fdPath(proc), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, mp := range hostMounts {
		if !under(mp, "/sys") {
			continue
		}
		src := mp
		if !iso.HostCgroups && isCgroupHierarchy(mp) {
			if src = ownCgroupIn(mp, cgroupProcs); src == "" {
				continue // left an empty directory
			}
		}
		if err := bindHostPath(r, src, mp, noLinks, !iso.WritableSysfs); err != nil {
			return fmt.Errorf("bind %s: %w", mp, err)
		}
	}
	return nil
}

// bindHostPath binds the host's src (not recursively) on path in r, made
// a directory when src is one, and makes it read-only when readOnly.
func bindHostPath(r *containerRoot, src, path string, links safepath.Mode, readOnly bool) error {
	fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	s := os.NewFile(uintptr(fd), src)
	defer s.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	dst, err := r.mountPoint(path, links, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := r.refuseProc(dst); err != nil {
		return err
	}
	return r.bindIn(s, dst, path, links, 0, readOnly)
}

// defaultDevices are the host devices every container's /dev holds (runc's
// and containerd's), beside its own pseudo-terminals; the runtime's devices
// cgroup allows these and denies the rest.
var defaultDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// mountDev gives the container a /dev of its own: the default devices of the
// host, its own pseudo-terminals, shared memory and message queues, then
// devices (the CRI's, each bound from the host where it asks). Unless
// nodes, a device node made in it does not open (nodev; the bound ones are
// mounts of their own). With u, /dev is the pod's root's.
//
// Its own files are made by path: the tmpfs is new, and nothing of the
// container's runs or is mounted yet.
func mountDev(r *containerRoot, devices []Device, nodes bool, u *podUserns) error {
	devDir, err := r.mountPoint("dev", noLinks, true)
	if err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	defer devDir.Close()
	dev := filepath.Join(r.path, "dev")
	flags := uintptr(unix.MS_NOSUID | unix.MS_STRICTATIME)
	if !nodes {
		flags |= unix.MS_NODEV
	}
	opts := "mode=755,size=65536k"
	if u != nil {
		uid, gid, err := u.hostOwner(0, 0)
		if err != nil {
			return err
		}
		opts += fmt.Sprintf(",uid=%d,gid=%d", uid, gid)
	}
	if err := unix.Mount("tmpfs", fdPath(devDir), "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, name := range defaultDevices {
		dst := filepath.Join(dev, name)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+name, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", name, err)
		}
	}
	for _, m := range []struct {
		dir, fstype, opts string
		flags             uintptr
	}{
		{"pts", "devpts", "newinstance,ptmxmode=0666,mode=0620", unix.MS_NOSUID | unix.MS_NOEXEC}, // ptys are devices: no nodev
		{"shm", "tmpfs", "mode=1777,size=65536k", unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV},
		{"mqueue", "mqueue", "", unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV},
	} {
		dst := filepath.Join(dev, m.dir)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fstype, dst, m.fstype, m.flags, m.opts); err != nil {
			return fmt.Errorf("mount /dev/%s: %w", m.dir, err)
		}
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	for _, d := range devices {
		if err := bindHostPath(r, d.HostPath, d.ContainerPath, followLinks, false); err != nil {
			return fmt.Errorf("device %s: bind %s: %w", d.ContainerPath, d.HostPath, err)
		}
	}
	return nil
}

// cloneSharedVolumes returns, by index in mounts, a detached copy of the
// source of each bidirectional ("rshared") bind mount, taken while it is
// still a peer of the source: once / is made a slave, a bind of it could
// only receive mounts, never send any back. Where open_tree is missing
// (Linux before 5.2), there is no copy and the volume is bound as any other.
func cloneSharedVolumes(mounts []Mount) (map[int]*os.File, error) {
	clones := map[int]*os.File{}
	for i, m := range mounts {
		if m.Propagation != "rshared" || (m.Type != "" && m.Type != "bind") {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if errors.Is(err, unix.ENOSYS) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("mount %s: copy %s: %w", m.Destination, m.Source, err)
		}
		clones[i] = os.NewFile(uintptr(fd), m.Source)
	}
	return clones, nil
}

// mountVolume applies one of the spec's mounts in r; clone, when set, is
// the copy of its source to attach (see cloneSharedVolumes). With u, a bind
// is an idmapped copy of its source: the pod's root owns what the host's
// root owns there, and what the pod's root writes is the host's root's, as
// containerd binds a volume into a pod in a user namespace; unless m is
// PodOwned.
func mountVolume(r *containerRoot, m Mount, clone *os.File, u *podUserns) error {
	if m.PodOwned {
		u = nil
	}
	if m.Type == "tmpfs" {
		dst, err := r.mountPoint(m.Destination, followLinks, true)
		if err != nil {
			return err
		}
		defer dst.Close()
		if err := r.refuseProc(dst); err != nil {
			return err
		}
		var flags uintptr = unix.MS_NOSUID | unix.MS_NODEV
		if m.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		return unix.Mount("tmpfs", fdPath(dst), "tmpfs", flags, "mode=1777")
	}
	if m.Type != "" && m.Type != "bind" {
		return fmt.Errorf("unknown mount type %q", m.Type)
	}
	var propagation uintptr
	switch m.Propagation {
	case "", "rprivate":
		propagation = unix.MS_PRIVATE
	case "rslave":
		propagation = unix.MS_SLAVE
	case "rshared":
		propagation = unix.MS_SHARED
	default:
		return fmt.Errorf("unknown propagation %q", m.Propagation)
	}
	detached := clone != nil || u != nil // a tree to move, not a path to bind
	var err error
	switch {
	case u != nil && clone != nil:
		if err = u.idmap(clone, true); err != nil {
			clone.Close()
			return err
		}
	case u != nil:
		if clone, err = u.idmapped(m.Source, true); err != nil {
			return err
		}
	case clone == nil:
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		clone = os.NewFile(uintptr(fd), m.Source) // not a copy: bound below
	}
	defer clone.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(clone.Fd()), &st); err != nil {
		return err
	}
	dst, err := r.mountPoint(m.Destination, followLinks, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := r.refuseProc(dst); err != nil {
		return err
	}
	if detached {
		err = unix.MoveMount(int(clone.Fd()), "", int(dst.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	} else {
		err = unix.Mount(fdPath(clone), fdPath(dst), "", unix.MS_BIND|unix.MS_REC, "")
	}
	if err != nil {
		return err
	}
	top, err := r.reopenMount(m.Destination, followLinks, &st)
	if err != nil {
		return err
	}
	defer top.Close()
	if m.ReadOnly {
		if err := remountReadOnly(fdPath(top)); err != nil {
			return err
		}
	}
	return unix.Mount("", fdPath(top), "", propagation|unix.MS_REC, "")
}

// mountImageVolume mounts m's image read-only in r: its layers stacked
// on stack, a dir outside the root (one layer is bound as it is: an overlay
// without an upper dir needs two), then m.SubPath of it bound on
// m.Destination. Neither is ever writable, and neither holds device nodes
// that open or setuid programs. With u, the layers are idmapped copies.
func mountImageVolume(r *containerRoot, m Mount, stack string, u *podUserns) error {
	if len(m.Layers) == 0 {
		return errors.New("the image has no layers")
	}
	layers := m.Layers
	if u != nil {
		var err error
		if layers, err = u.idmapLayers(layers, stack+"-layers"); err != nil {
			return fmt.Errorf("the image's layers: %w", err)
		}
	}
	if err := os.MkdirAll(stack, 0o700); err != nil {
		return err
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NODEV | unix.MS_NOSUID)
	var err error
	if len(layers) == 1 {
		if err = unix.Mount(layers[0], stack, "", unix.MS_BIND, ""); err == nil {
			err = unix.Mount("", stack, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
		}
	} else {
		err = mountLayers(layers, "", stack, flags)
	}
	if err != nil {
		return fmt.Errorf("stack the image's layers: %w", err)
	}
	top, err := os.Open(stack)
	if err != nil {
		return err
	}
	defer top.Close()
	src, err := safepath.Open(top, m.SubPath, safepath.InRoot) // the image's links name the image's paths
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("sub path %q of the image: %w", m.SubPath, err)
	}
	defer src.Close()
	return bindHostPath(r, fdPath(src), m.Destination, followLinks, true)
}

// maskPaths hides each path that exists in r: a directory under an empty
// read-only tmpfs, anything else under the null device. A masked path
// that is a symbolic link is refused, not followed (runc's CVE-2023-27561).
func maskPaths(r *containerRoot, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	null, err := openDevNull()
	if err != nil {
		return err
	}
	defer null.Close()
	for _, p := range paths {
		if err := maskPath(r, p, null); err != nil {
			return fmt.Errorf("masked path %s: %w", p, err)
		}
	}
	return nil
}

func maskPath(r *containerRoot, p string, null *os.File) error {
	dst, err := r.open(p, keepLast)
	if dst == nil || err != nil {
		return err
	}
	defer dst.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(dst.Fd()), &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return errors.New("a symbolic link: refused, a mask on its target would leave the path itself open")
	case unix.S_IFDIR:
		return unix.Mount("tmpfs", fdPath(dst), "tmpfs", unix.MS_RDONLY, "")
	}
	return unix.Mount(fdPath(null), fdPath(dst), "", unix.MS_BIND, "")
}

// readonlyPath binds p in r read-only onto itself, when it exists.
func readonlyPath(r *containerRoot, p string) error {
	dst, err := r.open(p, followLinks)
	if dst == nil || err != nil {
		return err
	}
	defer dst.Close()
	return r.bindIn(dst, dst, p, followLinks, 0, true)
}

// remountReadOnly makes the mount on path read-only, keeping its other flags
// (a bind remount that dropped nosuid, nodev or noexec would be refused or
// would lift them).
func remountReadOnly(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", path, "", flags, "")
}

// pivotRoot makes root this process's root and detaches the old one. Where
// pivot_root is refused (the old root is not a mount point, as in an
// initramfs), root is moved onto / and chrooted into instead.
func pivotRoot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		if err := unix.Mount(root, "/", "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move the root (pivot_root refused): %w", err)
		}
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("chroot (pivot_root refused): %w", err)
		}
		return unix.Chdir("/")
	}
	// The old root is now stacked on "/". Its mounts are slaves or private
	// since the start, so detaching it cannot propagate to the host. (A
	// propagation change on "." here would apply to the new root instead, and
	// turn rshared volumes into slaves.)
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// readMountPoints returns the mount points of this thread's mount
// namespace, each once, parents before children as mountinfo lists them.
// (/proc/self is the process's first thread's: a thread that unshared its
// mount namespace, as the tests do, sees its own through thread-self.)
func readMountPoints() ([]string, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPoint(fields[4])
		if !seen[mp] {
			seen[mp] = true
			points = append(points, mp)
		}
	}
	return points, sc.Err()
}

// unescapeMountPoint undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPoint(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
