package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxSymlinks bounds the symlinks one ReadFile follows, as Linux's
// MAXSYMLINKS.
const maxSymlinks = 40

// maxReadFile bounds what ReadFile returns: it reads small files
// (/etc/passwd, /etc/group) of images that may not be trusted.
const maxReadFile = 64 << 20

// ReadFile returns the content of the file at name (absolute in the image)
// in im's merged tree, as overlayfs shows it: the layers are searched top
// first, a whiteout hides what is below it, an opaque directory hides the
// lower layers' directory, and symlinks are followed inside the image root
// only (an absolute target, or ".." at the root, stays in the image). A
// missing file is an error wrapping fs.ErrNotExist.
func (s *Store) ReadFile(im *Image, name string) ([]byte, error) {
	m := mergedTree{layers: s.LayerDirs(im)}
	p, err := m.resolve(name)
	if err != nil {
		return nil, fmt.Errorf("read %s of image %s: %w", name, im.ID, err)
	}
	e, err := m.lookup(p)
	if err != nil {
		return nil, fmt.Errorf("read %s of image %s: %w", name, im.ID, err)
	}
	if e.dir {
		return nil, fmt.Errorf("read %s of image %s: is a directory", name, im.ID)
	}
	f, err := os.OpenFile(e.host, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s of image %s: %w", name, im.ID, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s of image %s: %w", name, im.ID, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s of image %s: not a regular file", name, im.ID)
	}
	if fi.Size() > maxReadFile {
		return nil, fmt.Errorf("read %s of image %s: larger than %d bytes", name, im.ID, maxReadFile)
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, fmt.Errorf("read %s of image %s: %w", name, im.ID, err)
	}
	return b, nil
}

// Exists reports whether name (absolute in the image, symlinks followed
// inside it) is in im's merged tree, file or directory.
func (s *Store) Exists(im *Image, name string) (bool, error) {
	m := mergedTree{layers: s.LayerDirs(im)}
	p, err := m.resolve(name)
	if err == nil {
		_, err = m.lookup(p)
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look %s up in image %s: %w", name, im.ID, err)
	}
	return true, nil
}

// mergedTree looks paths up in layer directories (top first) as overlayfs
// merges them.
type mergedTree struct {
	layers []string
}

// mergedEntry is what a path is in the merged tree.
type mergedEntry struct {
	dir bool
	// layers holds a directory's layers, top first, down to the first
	// opaque one; for anything else, the one layer that provides it.
	layers []int
	host   string // the path in the providing layer (not for directories)
	link   bool
}

// lookup finds p (clean, absolute, no symlinks in its parents) in the
// merged tree.
func (m mergedTree) lookup(p string) (mergedEntry, error) {
	e := mergedEntry{dir: true}
	for i := range m.layers {
		e.layers = append(e.layers, i)
	}
	if p == "/" {
		return e, nil
	}
	cur := ""
	for comp := range strings.SplitSeq(strings.TrimPrefix(p, "/"), "/") {
		if !e.dir {
			return mergedEntry{}, fmt.Errorf("%s: %w", cur, unix.ENOTDIR)
		}
		cur += "/" + comp
		next := mergedEntry{}
		found := false
	layers:
		for _, li := range e.layers {
			host := filepath.Join(m.layers[li], cur)
			var st unix.Stat_t
			if err := unix.Lstat(host, &st); err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
					continue
				}
				return mergedEntry{}, err
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFCHR:
				if st.Rdev == 0 { // a whiteout
					break layers
				}
			case unix.S_IFDIR:
				if found && !next.dir {
					break layers
				}
				found = true
				next.dir = true
				next.layers = append(next.layers, li)
				if isOpaque(host) {
					break layers
				}
				continue
			}
			if found {
				break // a directory above hides it
			}
			found = true
			next = mergedEntry{layers: []int{li}, host: host, link: st.Mode&unix.S_IFMT == unix.S_IFLNK}
			break
		}
		if !found {
			return mergedEntry{}, fmt.Errorf("%s: %w", cur, fs.ErrNotExist)
		}
		e = next
	}
	return e, nil
}

func isOpaque(dir string) bool {
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(dir, opaqueXattr, buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// resolve returns name with every symlink in it followed inside the image
// root: the result names no symlink.
func (m mergedTree) resolve(name string) (string, error) {
	resolved := "/"
	rest := strings.TrimPrefix(path.Clean("/"+name), "/")
	links := 0
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, comp)
		e, err := m.lookup(next)
		if err != nil {
			return "", err
		}
		if !e.link {
			resolved = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", fmt.Errorf("%s: %w", name, unix.ELOOP)
		}
		target, err := os.Readlink(e.host)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		rest = strings.TrimPrefix(target, "/") + "/" + rest
	}
	return resolved, nil
}
