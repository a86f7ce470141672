// Package safepath opens and makes paths beneath a root directory without
// ever following a symlink out of it: the resolution kubelet does for a
// volume's subPath after CVE-2017-1002101 and CVE-2021-25741
// (pkg/volume/util/subpath), and runc for a mount target in a container's
// root after CVE-2021-30465 (securejoin), for any directory whose content
// someone else controls.
//
// A Mode says how a symlink is taken. Beneath resolves as openat2(2)'s
// RESOLVE_BENEATH: symlinks whose targets stay beneath the root are
// followed; an absolute path, an absolute symlink, or a ".." (written or
// in a symlink) that climbs above the root is refused with ErrEscape, never
// re-rooted (a pod's link to "/" in its volume is the host's /, not the
// volume: kubelet refuses such a subPath). InRoot resolves as
// RESOLVE_IN_ROOT, as if the root were /: an absolute path or symlink
// starts again at the root and ".." stops there (a container's root, whose
// links name the container's own paths). Magic links (/proc/<pid>/fd/N and
// the like) are refused in both. Mount points beneath the root are crossed
// unless the mode says NoXDev. On kernels without openat2 (before 5.6) the
// path is walked one component at a time with openat(O_PATH|O_NOFOLLOW),
// each symlink read and resolved by hand under the same rules; what is
// made is made that way too.
//
// What is returned is a descriptor of the object found, held open: the
// caller acts on it (fstat, bind-mount /proc/self/fd/N, fchmod), so that
// whatever the owner of the directory swaps in after the open changes
// nothing.
package safepath

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrEscape is the error of a path that resolves outside its root (or, with
// NoXDev, crosses a mount point).
var ErrEscape = errors.New("resolves outside its root")

// Mode is how a path is resolved: Beneath or InRoot, with any of NoFollow,
// NoSymlinks and NoXDev.
type Mode uint8

const (
	// Beneath refuses an escape: see the package's doc.
	Beneath Mode = 0
	// InRoot resolves as if the root were /: see the package's doc.
	InRoot Mode = 1 << iota
	// NoFollow opens a trailing symlink itself (O_NOFOLLOW).
	NoFollow
	// NoSymlinks refuses any symlink on the way with ELOOP
	// (RESOLVE_NO_SYMLINKS).
	NoSymlinks
	// NoXDev refuses to cross a mount point with ErrEscape
	// (RESOLVE_NO_XDEV); the walk compares devices.
	NoXDev
)

// maxSymlinks is the number of symlinks one resolution may follow, the
// kernel's (MAXSYMLINKS).
const maxSymlinks = 40

// maxRetries bounds openat2's EAGAIN retries: a rename elsewhere raced a
// ".." of the resolution.
const maxRetries = 128

// noOpenat2 is set once openat2 answered ENOSYS; from then on every
// resolution walks. Tests set it to run the walk.
var noOpenat2 atomic.Bool

// Open resolves rel beneath the directory root as m says and returns a
// descriptor (O_PATH) of what it names: a directory, a file or anything
// else, a symlink only with NoFollow. An empty rel or "." is root itself.
// It fails with ErrEscape (errors.Is) when the resolution would leave root,
// with ENOENT when something is missing. The returned file's name is root's
// name joined with rel.
func Open(root *os.File, rel string, m Mode) (*os.File, error) {
	fd, err := open(int(root.Fd()), rel, m, nil, false)
	return file(root, rel, fd, err, "open")
}

// OpenDir is Open for a directory to read: rel resolved as Open resolves
// it, opened O_RDONLY|O_DIRECTORY (an O_PATH descriptor cannot list);
// ENOTDIR when it is not a directory (a FIFO is never opened for reading).
func OpenDir(root *os.File, rel string, m Mode) (*os.File, error) {
	fd, err := open(int(root.Fd()), rel, m, nil, true)
	return file(root, rel, fd, err, "open")
}

// MkdirAll makes the directory rel beneath root as kubelet's doSafeMakeDir:
// rel resolved as Open resolves it, each missing component created with
// mkdirat in its parent's descriptor, then opened O_NOFOLLOW and given perm
// with fchmod (the umask does not apply). A symlink swapped in for a new
// directory is never followed; one that was there is resolved as m says.
// rel is cleaned first, so that "a/../b" makes no a. It returns the final
// directory, open (O_RDONLY|O_DIRECTORY), existing or made; ENOTDIR when a
// component is not a directory.
func MkdirAll(root *os.File, rel string, perm os.FileMode, m Mode) (*os.File, error) {
	fd, err := open(int(root.Fd()), path.Clean(rel), m, &making{perm: perm}, true)
	return file(root, rel, fd, err, "mkdir")
}

// MkfileAll is MkdirAll for a file: the missing directories are made as
// MkdirAll makes them, with dirPerm, and rel, when missing, as an empty
// regular file with perm. It returns a descriptor of rel, whatever rel is.
func MkfileAll(root *os.File, rel string, dirPerm, perm os.FileMode, m Mode) (*os.File, error) {
	fd, err := open(int(root.Fd()), path.Clean(rel), m, &making{perm: dirPerm, file: true, filePerm: perm}, false)
	return file(root, rel, fd, err, "make")
}

func file(root *os.File, rel string, fd int, err error, op string) (*os.File, error) {
	if err != nil {
		return nil, &os.PathError{Op: op + " beneath " + root.Name(), Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(root.Name(), rel)), nil
}

// making is what open makes where a component is missing.
type making struct {
	perm     os.FileMode // a directory's
	file     bool        // the last component a regular file
	filePerm os.FileMode
}

// open resolves rel beneath root as m says, making what is missing with
// mk: openat2 first, the walk where a component is missing (to make it) or
// openat2 is not there. With dir it returns a directory open to read.
func open(root int, rel string, m Mode, mk *making, dir bool) (int, error) {
	if m&InRoot == 0 && path.IsAbs(rel) {
		return -1, ErrEscape
	}
	if !noOpenat2.Load() {
		fd, err := openat2(root, rel, m, dir)
		switch {
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ENOENT) && mk != nil:
		default:
			return fd, err
		}
	}
	fd, err := walk(root, rel, m, mk)
	if dir {
		return reopenDir(fd, err)
	}
	return fd, err
}

// openat2 opens rel O_PATH, or with dir a directory to read (O_DIRECTORY: a
// FIFO is never opened).
func openat2(root int, rel string, m Mode, dir bool) (int, error) {
	rel = strings.TrimLeft(rel, "/") // InRoot's; Beneath refused it
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	if dir {
		how.Flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	}
	if m&InRoot != 0 {
		how.Resolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
	}
	if m&NoFollow != 0 {
		how.Flags |= unix.O_NOFOLLOW
	}
	if m&NoSymlinks != 0 {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	if m&NoXDev != 0 {
		how.Resolve |= unix.RESOLVE_NO_XDEV
	}
	for range maxRetries {
		fd, err := unix.Openat2(root, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.EXDEV):
			return -1, ErrEscape
		}
		return -1, err
	}
	return -1, fmt.Errorf("raced by renames %d times: %w", maxRetries, unix.EAGAIN)
}

// walk is openat2 done by hand, as kubelet's doSafeOpen (which refuses
// every symlink; this follows those m allows): each component opened
// O_PATH|O_NOFOLLOW from its parent's descriptor, so that a symlink is
// seen, never followed by the kernel; a symlink's target is put in front of
// what is left of the path, and an absolute one starts again at root
// (InRoot) or is an escape; ".." goes back to the descriptor of the
// directory the walk came through, and above root it stays at root (InRoot)
// or is an escape. A missing component is made with mk, in its parent's
// descriptor.
func walk(root int, rel string, m Mode, mk *making) (int, error) {
	first, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var rootSt unix.Stat_t
	if err := unix.Fstat(first, &rootSt); err != nil {
		unix.Close(first)
		return -1, err
	}
	// dirs is the walk's way down: dirs[0] is root, the last is the
	// current directory (or, at the end, what rel names).
	dirs := []int{first}
	defer func() {
		for _, fd := range dirs {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	up := func(keep int) {
		for _, fd := range dirs[keep:] {
			unix.Close(fd)
		}
		dirs = dirs[:keep]
	}
	rest := strings.Split(strings.TrimLeft(rel, "/"), "/")
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch {
		case name == "" || name == ".":
			continue
		case name == ".." && len(dirs) > 1:
			up(len(dirs) - 1)
			continue
		case name == ".." && m&InRoot != 0:
			continue
		case name == "..":
			return -1, ErrEscape
		}
		fd, err := unix.Openat(dirs[len(dirs)-1], name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && mk != nil {
			fd, err = mk.make(dirs[len(dirs)-1], name, len(rest) == 0)
			if errors.Is(err, unix.EEXIST) {
				// Made by someone else since, or a dangling symlink:
				// resolved once more, as it is now.
				fd, err = unix.Openat(dirs[len(dirs)-1], name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if m&NoXDev != 0 && st.Dev != rootSt.Dev {
			unix.Close(fd)
			return -1, ErrEscape
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK || len(rest) == 0 && m&NoFollow != 0 {
			if len(rest) > 0 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				unix.Close(fd)
				return -1, unix.ENOTDIR
			}
			dirs = append(dirs, fd)
			continue
		}
		target, err := readlink(fd)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		if links++; links > maxSymlinks || m&NoSymlinks != 0 {
			return -1, unix.ELOOP
		}
		if path.IsAbs(target) {
			if m&InRoot == 0 {
				return -1, ErrEscape
			}
			up(1)
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	last := dirs[len(dirs)-1]
	dirs[len(dirs)-1] = -1
	return last, nil
}

// make makes name in the directory parent, a directory or, last and
// mk.file, an empty file, and opens it without following a symlink swapped
// in since; it gets its permissions whatever the umask.
func (mk *making) make(parent int, name string, last bool) (int, error) {
	var fd int
	var err error
	perm := mk.perm
	if last && mk.file {
		perm = mk.filePerm
		fd, err = unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
	} else if err = unix.Mkdirat(parent, name, uint32(perm.Perm())); err == nil {
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Fchmod(fd, kernelMode(perm)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// readlink reads the target of the symlink fd (opened O_PATH|O_NOFOLLOW).
func readlink(fd int) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// reopenDir turns fd, the walk's answer (a descriptor or its error), into
// a descriptor that reads the directory (and may fchmod it), closing fd;
// ENOTDIR when it is not one (a FIFO is never opened for reading).
func reopenDir(fd int, err error) (int, error) {
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, unix.ENOTDIR
	}
	return unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// kernelMode is perm as chmod(2) takes it.
func kernelMode(perm os.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&os.ModeSetgid != 0 {
		m |= unix.S_ISGID
	}
	if perm&os.ModeSetuid != 0 {
		m |= unix.S_ISUID
	}
	if perm&os.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}
