package shim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// copiedMarker, beside a container's upper dir, says that the upper dir
// holds a whole copy of its image (Rootfs.Copy): written last, so that a
// copy a crash cut short is made again.
const copiedMarker = "upper.copied"

// copyImage fills dst, an empty directory, with the merged tree of layers
// (top first) as overlayfs would show it: the layers applied bottom up, a
// whiteout removing what is below it, an opaque directory dropping what the
// lower layers put in it. Device nodes are skipped, as the store skips them.
// Nothing is followed: each path is made by this walk, its parents made (or
// replaced by directories) before it.
func copyImage(layers []string, dst string) error {
	for i := len(layers) - 1; i >= 0; i-- {
		if err := applyLayer(layers[i], dst); err != nil {
			return fmt.Errorf("copy layer %s: %w", layers[i], err)
		}
	}
	return nil
}

// applyLayer copies one unpacked layer (overlayfs's lower-dir format) over
// dst.
func applyLayer(layer, dst string) error {
	links := map[uint64]string{} // a hard-linked inode of the layer → its first copy
	return filepath.WalkDir(layer, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(layer, path)
		if err != nil || rel == "." {
			return err // the root's mode is the upper dir's, set by its maker
		}
		target := filepath.Join(dst, rel)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR, unix.S_IFBLK:
			if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 { // a whiteout
				return os.RemoveAll(target)
			}
			return nil
		case unix.S_IFDIR:
			opaque := make([]byte, 1)
			n, _ := unix.Lgetxattr(path, "trusted.overlay.opaque", opaque)
			if fi, err := os.Lstat(target); err == nil && (!fi.IsDir() || (n == 1 && opaque[0] == 'y')) {
				if err := os.RemoveAll(target); err != nil {
					return err
				}
			}
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			return setAttrs(target, &st, false)
		case unix.S_IFLNK:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.RemoveAll(target); err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			return os.Lchown(target, int(st.Uid), int(st.Gid))
		case unix.S_IFIFO:
			if err := os.RemoveAll(target); err != nil {
				return err
			}
			if err := unix.Mkfifo(target, 0o600); err != nil {
				return err
			}
			return setAttrs(target, &st, true)
		case unix.S_IFREG:
			if err := os.RemoveAll(target); err != nil {
				return err
			}
			if first, ok := links[st.Ino]; ok {
				return os.Link(first, target)
			}
			if st.Nlink > 1 {
				links[st.Ino] = target
			}
			if err := copyFile(path, target); err != nil {
				return err
			}
			return setAttrs(target, &st, true)
		}
		return nil // sockets: nothing an image needs
	})
}

// copyFile copies the content of the regular file src to a new file dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// setAttrs gives path the owner, mode (after the owner: chown clears the
// setuid bits) and, when times, the modification time of st.
func setAttrs(path string, st *unix.Stat_t, times bool) error {
	if err := os.Lchown(path, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Chmod(path, st.Mode&0o7777); err != nil {
		return err
	}
	if !times {
		return nil
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// copyImageRoot makes root the container's copy of its image: the upper dir,
// filled at the first start (or again after a copy cut short), bound on
// root.
func copyImageRoot(root string, rootfs *Rootfs, flags uintptr) error {
	marker := filepath.Join(filepath.Dir(rootfs.Upper), copiedMarker)
	if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
		entries, err := os.ReadDir(rootfs.Upper)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(rootfs.Upper, e.Name())); err != nil {
				return err
			}
		}
		if err := copyImage(rootfs.Layers, rootfs.Upper); err != nil {
			return err
		}
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := unix.Mount(rootfs.Upper, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}
