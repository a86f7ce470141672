package shim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
	real string   // as /proc/self/fd shows it, for the beneath check
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

// How open resolves a path in the root.
const (
	followLinks = iota // symbolic links followed, inside the root
	keepLast           // the last component not followed (masked paths)
	noLinks            // no symbolic link anywhere (the kernel's file systems' mount points)
)

// open returns an O_PATH descriptor of path in r, resolved as if r were /,
// through no magic link of /proc; nil and no error when it does not exist.
// A symbolic link is refused where links says so.
func (r *containerRoot) open(path string, links int) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	switch links {
	case keepLast:
		how.Flags |= unix.O_NOFOLLOW
	case noLinks:
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	rel := strings.TrimLeft(path, "/")
	if rel == "" {
		rel = "."
	}
	var fd int
	var err error
	for range 16 { // EAGAIN: a rename or mount raced the lookup
		if fd, err = unix.Openat2(int(r.fd.Fd()), rel, &how); err != unix.EAGAIN {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case errors.Is(err, unix.ENOSYS): // Linux before 5.6
		return r.walk(path, links, nil)
	case errors.Is(err, unix.ELOOP) && links == noLinks:
		return nil, errors.New("a symbolic link in the container's root, where a directory must be")
	case err != nil:
		return nil, err
	}
	return r.checked(os.NewFile(uintptr(fd), filepath.Join(r.path, rel)), links)
}

// mountPoint opens path in r as open does, creating what is missing:
// directories, and the last component a directory when dir, else an empty
// file. What it creates is made one component at a time under the
// descriptor of its parent, following no link: a link that appears
// meanwhile fails it.
func (r *containerRoot) mountPoint(path string, links int, dir bool) (*os.File, error) {
	f, err := r.open(path, links)
	if f != nil || err != nil {
		return f, err
	}
	return r.walk(path, links, &dir)
}

// walk opens path in r one component at a time, the links resolved first
// inside r (resolveIn) and none followed after, creating what is missing
// when create is set (*create: the last component is a directory). It is
// how mountPoint creates, and how open resolves without openat2.
func (r *containerRoot) walk(path string, links int, create *bool) (*os.File, error) {
	resolved := filepath.Clean("/" + path)
	if links == followLinks {
		p, err := resolveIn(r.path, path)
		if err != nil {
			return nil, err
		}
		resolved = strings.TrimPrefix(p, r.path)
	}
	parts := strings.FieldsFunc(resolved, func(c rune) bool { return c == '/' })
	dir, err := unix.FcntlInt(r.fd.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for i, name := range parts {
		last := i == len(parts)-1
		flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if !last {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat(dir, name, flags, 0)
		if errors.Is(err, unix.ENOENT) && create != nil {
			if last && !*create {
				err = makeFileAt(dir, name)
			} else {
				err = unix.Mkdirat(dir, name, 0o755)
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				fd, err = unix.Openat(dir, name, flags, 0)
			}
		}
		unix.Close(dir)
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s in the container's root: %w", filepath.Join(parts[:i+1]...), err)
		}
		dir = fd
	}
	return r.checked(os.NewFile(uintptr(dir), filepath.Join(r.path, resolved)), links)
}

// makeFileAt creates the empty file name in the directory dir, following
// no link.
func makeFileAt(dir int, name string) error {
	fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// checked returns f once it is sure f lies beneath r, and, but where links
// is keepLast, is no symbolic link; else it closes it and fails.
func (r *containerRoot) checked(f *os.File, links int) (*os.File, error) {
	p, err := os.Readlink(fdPath(f))
	if err == nil && !under(p, r.real) {
		err = fmt.Errorf("%s resolved to %s, out of the container's root", f.Name(), p)
	}
	if err == nil && links != keepLast {
		var st unix.Stat_t
		if err = unix.Fstat(int(f.Fd()), &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = fmt.Errorf("%s: %w", f.Name(), unix.ELOOP)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// bindIn binds src (an O_PATH descriptor) on dst, path's in r, with the
// further flags (MS_REC), and makes the new mount read-only when readOnly.
func (r *containerRoot) bindIn(src, dst *os.File, path string, links int, flags uintptr, readOnly bool) error {
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
func (r *containerRoot) reopenMount(path string, links int, st *unix.Stat_t) (*os.File, error) {
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
