// Package diskusage measures what a directory tree takes of its file system,
// as du does, without ever walking through a symlink: the trees measured
// (pods' volumes, containers' writable layers) are written by pods.
package diskusage

import (
	"errors"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/safepath"
)

// Usage is bytes (allocated blocks) and inodes used on a file system.
type Usage struct {
	Bytes  int64
	Inodes int64
}

// Measure is what the tree at root uses of root's file system, as du
// counts it: the blocks of each inode once, and the inodes; a file system
// mounted inside (a Memory emptyDir's tmpfs) is not counted. An absent root
// uses nothing. What is under root may be a pod's (its emptyDirs), which
// can swap a directory for a symlink while it is walked: each directory is
// opened beneath root (internal/safepath), never through a symlink out of
// it, and what moved meanwhile is left out.
func Measure(root string) (Usage, error) {
	var usage Usage
	r, err := os.Open(root)
	if os.IsNotExist(err) {
		return usage, nil
	}
	if err != nil {
		return usage, err
	}
	defer r.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(r.Fd()), &st); err != nil {
		return usage, err
	}
	rootDev := st.Dev
	usage.Bytes, usage.Inodes = st.Blocks*512, 1
	seen := map[uint64]bool{} // inodes with several links
	dirs := []string{"."}
	for len(dirs) > 0 {
		rel := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		d, err := safepath.OpenDir(r, rel, safepath.Beneath)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, safepath.ErrEscape) {
				continue // gone or swapped meanwhile
			}
			return usage, err
		}
		names, err := d.Readdirnames(-1)
		if err != nil {
			d.Close()
			return usage, err
		}
		for _, name := range names {
			if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				d.Close()
				return usage, err
			}
			if st.Dev != rootDev {
				continue
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			if st.Nlink > 1 && !isDir {
				if seen[st.Ino] {
					continue
				}
				seen[st.Ino] = true
			}
			usage.Bytes += st.Blocks * 512
			usage.Inodes++
			if isDir {
				dirs = append(dirs, path.Join(rel, name))
			}
		}
		d.Close()
	}
	return usage, nil
}
