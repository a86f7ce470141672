package shim

import (
	"fmt"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// A container sees its own cgroup only, as containerd's containers do: on
// cgroup v1, each hierarchy under /sys/fs/cgroup is its cgroup there, bound
// (runc's binds; no cgroup namespace, containerd's default on v1), and a
// hierarchy it has none in is an empty directory; on cgroup v2 the same
// bind, with a cgroup namespace rooted at its cgroup
// (Isolation.CgroupNamespace) so that /proc/self/cgroup says "0::/" of the
// tree it sees. A privileged container's is writable; on v2 it is the
// host's whole tree in the host's cgroup namespace (Isolation.HostCgroups),
// as containerd gives it.

// isCgroupHierarchy reports whether the host's mount point mp is a cgroup
// hierarchy (v1 or v2), not the tmpfs that holds v1's.
func isCgroupHierarchy(mp string) bool {
	var st unix.Statfs_t
	return unix.Statfs(mp, &st) == nil && (st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC)
}

// ownCgroupIn is the directory of the container's cgroup in the hierarchy
// mounted at mp, from its cgroup.procs files; "" when it has none there.
// A file may name its hierarchy by a link (cpu for cpu,cpuacct).
func ownCgroupIn(mp string, cgroupProcs []string) string {
	for _, f := range cgroupProcs {
		dir := filepath.Dir(f)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		if under(dir, mp) {
			return dir
		}
	}
	return ""
}

// unshareCgroupNamespace gives the calling thread, which executes the
// command, a cgroup namespace rooted at the cgroup it is in: the
// container's, joined by now.
func unshareCgroupNamespace() error {
	runtime.LockOSThread() // never unlocked: the thread becomes the command or the process ends
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("a cgroup namespace: %w", err)
	}
	return nil
}

// joinCgroupNamespace puts the calling thread, which executes an exec's
// command, in the cgroup namespace of the container's process pid.
func joinCgroupNamespace(pid string) error {
	runtime.LockOSThread() // never unlocked: the thread becomes the command or the process ends
	fd, err := unix.Open("/proc/"+pid+"/ns/cgroup", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the container's cgroup namespace: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("join the container's cgroup namespace: %w", err)
	}
	return nil
}
