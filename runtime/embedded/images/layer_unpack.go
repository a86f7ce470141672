package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/safepath"
)

const (
	whiteoutPrefix = ".wh."
	// whiteoutMeta starts the names of aufs metadata (".wh..wh.plnk"),
	// which mean nothing to overlayfs.
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
	// overlayXattrs are overlayfs's own; a layer's tar may not set them
	// (a redirect or metacopy xattr would change what the merged tree
	// shows), only the whiteout conversion does.
	overlayXattrs = "trusted.overlay."
	paxXattr      = "SCHILY.xattr."
)

// errEscape marks an entry that would write outside the layer directory.
var errEscape = errors.New("escapes the layer")

// extractLayer unpacks the layer tar read from r into dir, an empty
// directory, in overlayfs lower-dir format: a whiteout ".wh.NAME" becomes
// a character device 0/0 NAME, an opaque marker ".wh..wh..opq" sets
// trusted.overlay.opaque=y on its directory. Regular files, directories,
// symlinks (stored verbatim), hard links to entries of the same layer and
// fifos are made with their modes (setuid, setgid and sticky included),
// owners, modification times and PAX xattrs (where the file system takes
// them); device nodes are skipped, as a container gets its devices from
// the runtime.
//
// Nothing is written outside dir: every path is resolved below dir's file
// descriptor by internal/safepath (openat2's RESOLVE_BENEATH, crossing no
// mount point, or its walk on kernels before 5.6), so an entry climbing out with
// "..", or through a symlink pointing out of the layer (absolute, or
// climbing with ".."), is refused, as is a hard link to a file outside the
// layer; the last component is never followed. Leading "/" in names are
// dropped: a layer's names are relative to its root.
func extractLayer(dir string, r io.Reader) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	root := os.NewFile(uintptr(fd), dir)
	defer root.Close()
	// The root's mode when the layer has no "./" entry, as docker and
	// containerd leave it.
	if err := unix.Fchmod(fd, 0o755); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	x := &extractor{root: root, rootPath: dir, whiteouts: make(map[string]bool)}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer tar: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	// Directory times last: making their entries changed them.
	for i := len(x.dirTimes) - 1; i >= 0; i-- {
		if err := x.setTimes(x.dirTimes[i].path, x.dirTimes[i].hdr); err != nil {
			return fmt.Errorf("entry %q: %w", x.dirTimes[i].hdr.Name, err)
		}
	}
	// Everything on disk before the layer is renamed into place.
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

type extractor struct {
	root     *os.File // the layer directory
	rootPath string   // its path, for the root's own times
	dirTimes []dirTime
	// whiteouts are the paths this layer whited out: a directory made
	// there later hides the lower layers' one (it is made opaque), as the
	// OCI spec's "deleted then re-created" reads.
	whiteouts map[string]bool
}

type dirTime struct {
	path string
	hdr  *tar.Header
}

// entryPath is a tar entry's name as a clean path relative to the layer
// root ("." for the root itself); a name climbing out with ".." is
// refused.
func entryPath(name string) (string, error) {
	p := path.Clean(strings.TrimLeft(name, "/"))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("path %q: %w", name, errEscape)
	}
	return p, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	p, err := entryPath(hdr.Name)
	if err != nil {
		return err
	}
	if p == "." {
		if hdr.Typeflag != tar.TypeDir {
			return nil
		}
		if err := x.setAttrs(int(x.root.Fd()), hdr); err != nil {
			return err
		}
		x.dirTimes = append(x.dirTimes, dirTime{".", hdr})
		return nil
	}
	dir, base := path.Split(p)
	dir = path.Clean("./" + dir)

	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeXGlobalHeader:
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo, tar.TypeCont, tar.TypeGNUSparse:
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		return x.whiteout(dir, base)
	}

	pdir, err := x.openDir(dir, true)
	if err != nil {
		return err
	}
	defer pdir.Close()
	pfd := int(pdir.Fd())
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.mkdir(pfd, p, base, hdr)
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse: // the reader expands a sparse file
		if err := removeAt(pfd, base); err != nil {
			return err
		}
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		f := os.NewFile(uintptr(fd), p)
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return fmt.Errorf("write: %w", err)
		}
		err = x.setAttrs(fd, hdr)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write: %w", cerr)
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := removeAt(pfd, base); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	case tar.TypeLink:
		return x.link(pfd, p, base, hdr)
	case tar.TypeFifo:
		if err := removeAt(pfd, base); err != nil {
			return err
		}
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("mkfifo: %w", err)
		}
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown: %w", err)
		}
		// Not a symlink (just made), so following is harmless.
		if err := unix.Fchmodat(pfd, base, uint32(hdr.Mode&0o7777), 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	return x.setTimesAt(pfd, base, hdr)
}

// whiteout converts the whiteout entry base in dir.
func (x *extractor) whiteout(dir, base string) error {
	pdir, err := x.openDir(dir, true)
	if err != nil {
		return err
	}
	defer pdir.Close()
	pfd := int(pdir.Fd())
	if base == whiteoutOpaque {
		if err := unix.Fsetxattr(pfd, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %s opaque: %w", dir, err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("whiteout of %q: bad name", name)
	}
	// A whiteout hides the lower layers' entry only: an entry of this
	// layer by that name stays (OCI image spec, "Whiteouts").
	var st unix.Stat_t
	switch err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return nil
	case !errors.Is(err, unix.ENOENT):
		return fmt.Errorf("whiteout: %w", err)
	}
	if err := unix.Mknodat(pfd, name, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("whiteout: %w", err)
	}
	x.whiteouts[path.Join(dir, name)] = true
	return nil
}

// mkdir makes directory base in pfd, or keeps the directory there.
func (x *extractor) mkdir(pfd int, p, base string, hdr *tar.Header) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := removeAt(pfd, base); err != nil {
			return err
		}
		err = unix.ENOENT
	}
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("stat: %w", err)
		}
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
	}
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer unix.Close(fd)
	if x.whiteouts[p] {
		if err := unix.Fsetxattr(fd, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark opaque: %w", err)
		}
	}
	if err := x.setAttrs(fd, hdr); err != nil {
		return err
	}
	x.dirTimes = append(x.dirTimes, dirTime{p, hdr})
	return nil
}

// link makes base in pfd a hard link to the entry hdr.Linkname of this
// layer.
func (x *extractor) link(pfd int, p, base string, hdr *tar.Header) error {
	target, err := entryPath(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	if target == p {
		return nil
	}
	if target == "." {
		return fmt.Errorf("hard link to the layer root")
	}
	tdir, tbase := path.Split(target)
	td, err := x.openDir(path.Clean("./"+tdir), false)
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	defer td.Close()
	tfd := int(td.Fd())
	var tst, st unix.Stat_t
	if err := unix.Fstatat(tfd, tbase, &tst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("hard link target %q is not in the layer: %w", hdr.Linkname, err)
	}
	if tst.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("hard link target %q is a directory", hdr.Linkname)
	}
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Dev == tst.Dev && st.Ino == tst.Ino {
		return nil
	}
	if err := removeAt(pfd, base); err != nil {
		return err
	}
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		return fmt.Errorf("hard link: %w", err)
	}
	return nil
}

// setAttrs gives the open file or directory fd the entry's owner, mode and
// xattrs, in that order: chown clears setuid, setgid and capabilities.
func (x *extractor) setAttrs(fd int, hdr *tar.Header) error {
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok || strings.HasPrefix(name, overlayXattrs) {
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) {
				continue
			}
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

func (x *extractor) setTimes(p string, hdr *tar.Header) error {
	if p == "." {
		return unix.UtimesNanoAt(unix.AT_FDCWD, x.rootPath, entryTimes(hdr), unix.AT_SYMLINK_NOFOLLOW)
	}
	dir, base := path.Split(p)
	pdir, err := x.openDir(path.Clean("./"+dir), false)
	if err != nil {
		return err
	}
	defer pdir.Close()
	pfd := int(pdir.Fd())
	return x.setTimesAt(pfd, base, hdr)
}

func (x *extractor) setTimesAt(pfd int, base string, hdr *tar.Header) error {
	if err := unix.UtimesNanoAt(pfd, base, entryTimes(hdr), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

func entryTimes(hdr *tar.Header) []unix.Timespec {
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	return []unix.Timespec{timespec(atime), timespec(hdr.ModTime)}
}

func timespec(t time.Time) unix.Timespec {
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

// openDir opens the directory p (clean, relative to the layer root)
// without leaving the layer (safepath.Beneath, crossing no mount point):
// symlinks in p are followed only while they stay below the root. With
// create, missing directories are made (0755, root-owned, as docker and
// containerd make a parent a layer does not list).
func (x *extractor) openDir(p string, create bool) (*os.File, error) {
	var d *os.File
	var err error
	if create {
		d, err = safepath.MkdirAll(x.root, p, 0o755, safepath.Beneath|safepath.NoXDev)
	} else {
		d, err = safepath.OpenDir(x.root, p, safepath.Beneath|safepath.NoXDev)
	}
	switch {
	case errors.Is(err, safepath.ErrEscape):
		return nil, fmt.Errorf("directory %q: %w", p, errEscape)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("directory %q: a symlink loop or magic link: %w", p, unix.ELOOP)
	case err != nil:
		return nil, fmt.Errorf("directory %q: %w", p, errors.Unwrap(err))
	}
	return d, nil
}

// removeAt removes name from dirfd, a directory with all it holds; a
// missing name is not an error.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	names, err := d.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = removeAt(fd, n); err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}
