package shim

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/safepath"
)

// containerRoot is the container's root while its init builds it. Every
// path the init mounts on, or binds from, inside it is opened beneath it
// and the mount made on the open descriptor (/proc/self/fd/N), never on the
// path again: a container sharing a volume with this one cannot swap a
// directory for a symbolic link to the host's / between the check and the
// mount (runc's CVE-2021-30465), the init has not pivoted yet.
type containerRoot struct {
	path string   // as the init names it
	fd   *os.File // O_PATH
	real string   // as /proc/self/fd shows it, for refuseProc
}

func openContainerRoot(path string) (*containerRoot, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the container's root: %w", err)
	}
	r := &containerRoot{path: path, fd: os.NewFile(uintptr(fd), path)}
	if r.real, err = os.Readlink(fdPath(r.fd)); err != nil {
		r.fd.Close()
		return nil, err
	}
	return r, nil
}

func (r *containerRoot) Close() error { return r.fd.Close() }

// fdPath is the path by which the kernel reaches f's own file, whatever
// happened to the path f was opened by since.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// How open resolves a path in the root: as if the root were /, through no
// magic link of /proc (safepath.InRoot).
const (
	followLinks = safepath.InRoot                       // symbolic links followed, inside the root
	keepLast    = safepath.InRoot | safepath.NoFollow   // the last component not followed (masked paths)
	noLinks     = safepath.InRoot | safepath.NoSymlinks // no symbolic link anywhere (the kernel's file systems' mount points)
)

// open returns an O_PATH descriptor of path in r, resolved as links says;
// nil and no error when it does not exist.
func (r *containerRoot) open(path string, links safepath.Mode) (*os.File, error) {
	f, err := safepath.Open(r.fd, path, links)
	return found(f, err, links)
}

// mountPoint opens path in r as open does, creating what is missing:
// directories, and the last component a directory when dir, else an empty
// file. What it creates is made one component at a time under the
// descriptor of its parent (safepath.MkdirAll), following no link out of
// the root.
func (r *containerRoot) mountPoint(path string, links safepath.Mode, dir bool) (*os.File, error) {
	f, err := r.open(path, links)
	if f != nil || err != nil {
		return f, err
	}
	if dir {
		f, err = safepath.MkdirAll(r.fd, path, 0o755, links)
	} else {
		f, err = safepath.MkfileAll(r.fd, path, 0o755, 0o644, links)
	}
	return found(f, err, links)
}

// found is open's answer from safepath's: nil and no error for a missing
// path, and a symbolic link where links refuses one said so.
func found(f *os.File, err error, links safepath.Mode) (*os.File, error) {
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case errors.Is(err, unix.ELOOP) && links == noLinks:
		return nil, errors.New("a symbolic link in the container's root, where a directory must be")
	}
	return f, err
}

// bindIn binds src (an O_PATH descriptor) on dst, path's in r, with the
// further flags (MS_REC), and makes the new mount read-only when readOnly.
func (r *containerRoot) bindIn(src, dst *os.File, path string, links safepath.Mode, flags uintptr, readOnly bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	if err := unix.Mount(fdPath(src), fdPath(dst), "", unix.MS_BIND|flags, ""); err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	top, err := r.reopenMount(path, links, &st)
	if err != nil {
		return err
	}
	defer top.Close()
	return remountReadOnly(fdPath(top))
}

// reopenMount opens path in r again once the file st describes was mounted
// there: dst's descriptor still names the file under the mount, and a flag
// changed through it would change that file's mount. It fails unless path
// is st's file now (a container swapped the path meanwhile).
func (r *containerRoot) reopenMount(path string, links safepath.Mode, st *unix.Stat_t) (*os.File, error) {
	top, err := r.open(path, links)
	if err != nil {
		return nil, err
	}
	var now unix.Stat_t
	if top == nil || unix.Fstat(int(top.Fd()), &now) != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		if top != nil {
			top.Close()
		}
		return nil, fmt.Errorf("%s changed while it was mounted", path)
	}
	return top, nil
}

// openDevNull opens the host's /dev/null (O_PATH), the file binds mask
// files with, and checks it is the null device: a /dev/null that is not
// would turn a mask into a window (runc's CVE-2025-31133).
func openDevNull() (*os.File, error) {
	fd, err := unix.Open("/dev/null", unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		unix.Close(fd)
		return nil, fmt.Errorf("/dev/null is not the null device (%v)", err)
	}
	return os.NewFile(uintptr(fd), "/dev/null"), nil
}

// procMountTargets are the files of /proc a volume may cover: lxcfs's,
// runc's list. Any other mount over /proc, or over the container's /proc
// itself, is refused as runc refuses it: the init and its execs read /proc
// after the pivot, and a container's files there would be taken for the
// kernel's.
var procMountTargets = []string{
	"/proc/cpuinfo", "/proc/diskstats", "/proc/meminfo", "/proc/stat", "/proc/swaps",
	"/proc/uptime", "/proc/loadavg", "/proc/slabinfo", "/proc/net/dev", "/proc/sys/kernel/ns_last_pid",
}

// refuseProc fails unless dst, a mount point opened in r, is off procfs or
// one of procMountTargets.
func (r *containerRoot) refuseProc(dst *os.File) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(dst.Fd()), &fs); err != nil {
		return err
	}
	if fs.Type != unix.PROC_SUPER_MAGIC {
		return nil
	}
	p, err := os.Readlink(fdPath(dst))
	if err != nil {
		return err
	}
	if p = "/" + strings.TrimLeft(strings.TrimPrefix(p, r.real), "/"); slices.Contains(procMountTargets, p) {
		return nil
	}
	return fmt.Errorf("%s is in the container's /proc, where only lxcfs's files may be mounted over", p)
}
