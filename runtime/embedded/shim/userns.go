package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/kernel"
)

// initUsernsEnv, when set, tells a container's init that it was executed
// again, through nsenter, in the pod's user namespace after it built the
// container's mounts: it holds "<spec fd> <shim binary fd> <namespace fd>",
// and the init runs the command from there (see enterUserNamespace).
const initUsernsEnv = "JETLET_PROC_SHIM_USERNS_FDS"

// podUserns is the pod's user namespace as a container's init uses it while
// it builds the container's mounts as the host's root: what it idmaps to it
// and whom it makes own what it creates.
type podUserns struct {
	ns   *os.File
	spec *UserNamespace
}

func openPodUserns(spec *UserNamespace) (*podUserns, error) {
	ns, err := os.Open(spec.Path)
	if err != nil {
		return nil, fmt.Errorf("the pod's user namespace: %w", err)
	}
	return &podUserns{ns: ns, spec: spec}, nil
}

// idmapped returns a detached copy of the mount tree at src (recursive: its
// submounts too) whose files appear through the pod's mappings: a file the
// host's uid 0 owns is owned by the pod's root, and what the pod's root
// writes is the host's uid 0's. Every file system under src must support
// idmapped mounts.
func (u *podUserns) idmapped(src string, recursive bool) (*os.File, error) {
	flags := unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, uint(flags))
	if err != nil {
		return nil, fmt.Errorf("copy the mount of %s: %w", src, err)
	}
	tree := os.NewFile(uintptr(fd), src)
	if err := u.idmap(tree, recursive); err != nil {
		tree.Close()
		return nil, err
	}
	return tree, nil
}

// idmap maps the detached mount tree to the pod's user namespace.
func (u *podUserns) idmap(tree *os.File, recursive bool) error {
	flags := unix.AT_EMPTY_PATH
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(u.ns.Fd())}
	err := unix.MountSetattr(int(tree.Fd()), "", uint(flags), &attr)
	var fs unix.Statfs_t
	if errors.Is(err, unix.EINVAL) && unix.Fstatfs(int(tree.Fd()), &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		// As kubelet and containerd, no fallback: the pod's root could not
		// write its own volume (secret, projected, Memory emptyDir).
		return fmt.Errorf("%s is a tmpfs, which this kernel (Linux %s) cannot idmap to the pod's user namespace (Linux 6.3 can): run the pod with hostUsers: true, or on a newer kernel", tree.Name(), kernel.Release())
	}
	if err != nil {
		return fmt.Errorf("idmap %s to the pod's user namespace (its file system must support idmapped mounts): %w", tree.Name(), err)
	}
	return nil
}

// idmapLayers mounts an idmapped copy of each image layer under dir (named
// 0, 1, ... in layers' order, so that overlayfs takes them by short names)
// and returns their paths.
func (u *podUserns) idmapLayers(layers []string, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	mapped := make([]string, len(layers))
	for i, l := range layers {
		mapped[i] = filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(mapped[i], 0o700); err != nil {
			return nil, err
		}
		tree, err := u.idmapped(l, false)
		if err != nil {
			return nil, err
		}
		err = attach(tree, mapped[i])
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l, err)
		}
	}
	return mapped, nil
}

// hostID is the host's id of the namespace's id, by maps; ok false when
// the namespace does not map it.
func hostID(maps []IDMap, id uint32) (uint32, bool) {
	for _, m := range maps {
		if id >= m.ContainerID && id-m.ContainerID < m.Size {
			return m.HostID + (id - m.ContainerID), true
		}
	}
	return 0, false
}

// hostOwner is the host's uid and gid of the namespace's uid and gid.
func (u *podUserns) hostOwner(uid, gid uint32) (int, int, error) {
	hu, ok := hostID(u.spec.UIDs, uid)
	if !ok {
		return 0, 0, fmt.Errorf("uid %d is not mapped in the pod's user namespace", uid)
	}
	hg, ok := hostID(u.spec.GIDs, gid)
	if !ok {
		return 0, 0, fmt.Errorf("gid %d is not mapped in the pod's user namespace", gid)
	}
	return int(hu), int(hg), nil
}

// attach moves the detached mount tree onto dst and closes it.
func attach(tree *os.File, dst string) error {
	defer tree.Close()
	return unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// usernsHandoff is what a container's init keeps across pivot_root to enter
// the pod's user namespace: the container's spec, the shim binary and
// nsenter (neither need exist in the container's root) and the namespace.
type usernsHandoff struct {
	spec, exe, nsenter, ns *os.File
}

func openUsernsHandoff(dir, nsenter string, u *podUserns) (*usernsHandoff, error) {
	h := &usernsHandoff{ns: u.ns}
	var err error
	if h.spec, err = os.Open(filepath.Join(dir, "spec.json")); err != nil {
		return nil, err
	}
	if h.exe, err = os.Open("/proc/self/exe"); err != nil {
		return nil, err
	}
	if h.nsenter, err = os.Open(nsenter); err != nil {
		return nil, fmt.Errorf("nsenter: %w", err)
	}
	return h, nil
}

// enterUserNamespace executes nsenter (single-threaded, which setns into a
// user namespace requires; a Go process never is) to enter the pod's user
// namespace as its root and execute this binary again, keeping this pid, the
// sync socket, the container's mounts and the working dir, its root. The
// init then pivots there (pivotRootHere) and goes on from "ready"
// (initContainer). nsenter runs before the pivot: it is the host's, and
// its libraries are the host's. It returns only on failure.
func enterUserNamespace(h *usernsHandoff, sync *os.File) error {
	for _, f := range []*os.File{sync, h.spec, h.exe, h.ns} {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("keep %s across exec: %w", f.Name(), err)
		}
	}
	env := append(os.Environ(), fmt.Sprintf("%s=%d %d %d", initUsernsEnv, h.spec.Fd(), h.exe.Fd(), h.ns.Fd()))
	args := []string{"nsenter", fmt.Sprintf("--user=/proc/self/fd/%d", h.ns.Fd()), "--", fmt.Sprintf("/proc/self/fd/%d", h.exe.Fd())}
	err := unix.Exec(fmt.Sprintf("/proc/self/fd/%d", h.nsenter.Fd()), args, env)
	return fmt.Errorf("exec nsenter into the pod's user namespace: %w", err)
}

// pivotRootHere makes the working dir, the container's root built by the
// init before it entered the pod's user namespace, the root of a mount
// namespace of the pod's user namespace. The init's mount namespace is the
// host's user namespace's, whose mounts a namespace made from it holds
// locked: pivot_root refuses a locked root, so the root is a new copy of its
// tree, mounted on itself. The calling thread stays locked: it alone is in
// the new namespace, and it executes the command.
func pivotRootHere() error {
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("a mount namespace in the pod's user namespace: %w", err)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, ".", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("copy the container's root: %w", err)
	}
	tree := os.NewFile(uintptr(fd), "rootfs")
	defer tree.Close()
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, ".", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount the container's root: %w", err)
	}
	if err := unix.Fchdir(fd); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

// usernsFDs parses initUsernsEnv: the spec's, the binary's and the
// namespace's descriptors; ok false when this init has not entered one.
func usernsFDs() (spec, exe, ns int, ok bool, err error) {
	v := os.Getenv(initUsernsEnv)
	if v == "" {
		return 0, 0, 0, false, nil
	}
	f := strings.Fields(v)
	if len(f) != 3 {
		return 0, 0, 0, false, fmt.Errorf("%s=%q", initUsernsEnv, v)
	}
	var fds [3]int
	for i := range f {
		if fds[i], err = strconv.Atoi(f[i]); err != nil {
			return 0, 0, 0, false, fmt.Errorf("%s=%q", initUsernsEnv, v)
		}
	}
	return fds[0], fds[1], fds[2], true, nil
}

// readSpecFrom reads the spec from the descriptor fd and closes it.
func readSpecFrom(fd int) ([]byte, error) {
	f := os.NewFile(uintptr(fd), "spec.json")
	defer f.Close()
	return io.ReadAll(f)
}

// hold is ModeHold: it waits until its stdin ends.
func hold() error {
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}
