// Package safepath opens paths beneath a root directory without ever
// following a symlink out of it: the resolution kubelet does for a volume's
// subPath after CVE-2017-1002101 and CVE-2021-25741
// (pkg/volume/util/subpath), for any directory whose content someone else
// controls (a pod's volume).
//
// A path is resolved as openat2(2)'s RESOLVE_BENEATH resolves it: symlinks
// whose targets stay beneath the root are followed; an absolute path, an
// absolute symlink, or a ".." (written or in a symlink) that climbs above
// the root is refused with ErrEscape, never re-rooted (RESOLVE_IN_ROOT would
// turn a pod's link to "/" into the volume itself; kubelet refuses such a
// subPath, and so does this package). Magic links (/proc/<pid>/fd/N and the
// like) are refused. Mount points beneath the root are crossed: a hostPath
// volume's tree may hold mounts, which kubelet crosses too, and a pod cannot
// mount on the host. On kernels without openat2 (before 5.6) the path is
// walked one component at a time with openat(O_PATH|O_NOFOLLOW), each
// symlink read and resolved by hand under the same rules.
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

// ErrEscape is the error of a path that resolves outside its root.
var ErrEscape = errors.New("resolves outside its root")

// maxSymlinks is the number of symlinks one resolution may follow, the
// kernel's (MAXSYMLINKS).
const maxSymlinks = 40

// maxRetries bounds openat2's EAGAIN retries: a rename elsewhere raced a
// ".." of the resolution.
const maxRetries = 128

// noOpenat2 is set once openat2 answered ENOSYS; from then on every
// resolution walks. Tests set it to run the walk.
var noOpenat2 atomic.Bool

// Open resolves rel beneath the directory root and returns an O_PATH
// descriptor of what it names: a directory, a file or anything else, never
// a symlink (a trailing symlink that stays beneath root is followed). An
// empty rel or "." is root itself. It fails with ErrEscape (errors.Is) when
// the resolution would leave root, with ENOENT when something is missing.
// The returned file's name is root's name joined with rel.
func Open(root *os.File, rel string) (*os.File, error) {
	fd, err := openBeneath(int(root.Fd()), rel)
	if err != nil {
		return nil, &os.PathError{Op: "open beneath " + root.Name(), Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(root.Name(), rel)), nil
}

func openBeneath(root int, rel string) (int, error) {
	if path.IsAbs(rel) {
		return -1, ErrEscape
	}
	if !noOpenat2.Load() {
		fd, err := openat2(root, rel)
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return walk(root, rel)
}

func openat2(root int, rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
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

// walk is openat2's RESOLVE_BENEATH done by hand, as kubelet's doSafeOpen
// (which refuses every symlink; this follows those that stay beneath root):
// each component opened O_PATH|O_NOFOLLOW from its parent's descriptor, so
// that a symlink is seen, never followed by the kernel; a symlink's target
// is put in front of what is left of the path; ".." goes back to the
// descriptor of the directory the walk came through, and above root it is
// an escape.
func walk(root int, rel string) (int, error) {
	first, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
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
	rest := strings.Split(rel, "/")
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(dirs) == 1 {
				return -1, ErrEscape
			}
			unix.Close(dirs[len(dirs)-1])
			dirs = dirs[:len(dirs)-1]
			continue
		}
		fd, err := unix.Openat(dirs[len(dirs)-1], name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
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
		if links++; links > maxSymlinks {
			return -1, unix.ELOOP
		}
		if path.IsAbs(target) {
			return -1, ErrEscape
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	last := dirs[len(dirs)-1]
	dirs[len(dirs)-1] = -1
	return last, nil
}

// OpenDir is Open for a directory to read: rel resolved as Open resolves
// it, reopened O_RDONLY|O_DIRECTORY (an O_PATH descriptor cannot list);
// ENOTDIR when it is not a directory (a FIFO is never opened for reading).
func OpenDir(root *os.File, rel string) (*os.File, error) {
	fd, err := openDirBeneath(int(root.Fd()), rel)
	if err != nil {
		return nil, &os.PathError{Op: "open beneath " + root.Name(), Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(root.Name(), rel)), nil
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

// MkdirAll makes the directory rel beneath root as kubelet's doSafeMakeDir:
// each missing component created with mkdirat in its parent's descriptor
// (the parent resolved as Open resolves it), then opened O_NOFOLLOW and
// given perm with fchmod (the umask does not apply). A symlink swapped in
// for a new directory is never followed; one that was there is followed as
// Open follows it, beneath root only. It returns the final directory, open
// (O_RDONLY|O_DIRECTORY), existing or made; ENOTDIR when a component is not
// a directory.
func MkdirAll(root *os.File, rel string, perm os.FileMode) (*os.File, error) {
	if path.IsAbs(rel) {
		return nil, &os.PathError{Op: "mkdir beneath " + root.Name(), Path: rel, Err: ErrEscape}
	}
	fd, err := mkdirAll(int(root.Fd()), path.Clean(rel), perm)
	if err != nil {
		return nil, &os.PathError{Op: "mkdir beneath " + root.Name(), Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(root.Name(), rel)), nil
}

func mkdirAll(root int, rel string, perm os.FileMode) (int, error) {
	parent, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if rel == "." {
		return parent, nil
	}
	parts := strings.Split(rel, "/")
	for i, name := range parts {
		fd, err := openDirBeneath(root, strings.Join(parts[:i+1], "/"))
		if errors.Is(err, unix.ENOENT) {
			fd, err = mkdirat(parent, name, perm)
			if errors.Is(err, unix.EEXIST) {
				// Made by someone else since, or a dangling symlink:
				// resolved once more, as it is now.
				fd, err = openDirBeneath(root, strings.Join(parts[:i+1], "/"))
			}
		}
		unix.Close(parent)
		if err != nil {
			return -1, err
		}
		parent = fd
	}
	return parent, nil
}

// openDirBeneath opens the directory rel beneath root O_RDONLY, resolved as
// Open resolves it (O_PATH first: opening a FIFO for reading would block).
func openDirBeneath(root int, rel string) (int, error) {
	p, err := openBeneath(root, rel)
	if err != nil {
		return -1, err
	}
	defer unix.Close(p)
	return reopenDir(p)
}

// reopenDir turns the O_PATH descriptor of a directory into one that reads
// it (and may fchmod it); ENOTDIR when it is not one.
func reopenDir(fd int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, unix.ENOTDIR
	}
	return unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// mkdirat makes name in parent and opens it without following a symlink
// swapped in since; it gets perm whatever the umask.
func mkdirat(parent int, name string, perm os.FileMode) (int, error) {
	if err := unix.Mkdirat(parent, name, uint32(perm.Perm())); err != nil {
		return -1, err
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Fchmod(fd, kernelMode(perm)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
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
