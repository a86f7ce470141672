package images

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// diskUsage is what a tree takes on disk.
type diskUsage struct {
	bytes  uint64 // allocated blocks, in bytes
	inodes uint64 // distinct inodes
}

// Usage reports what the store takes on disk (for the CRI's ImageFsInfo):
// the bytes its files' blocks take and the inodes they use, and the
// store's directory, which containerd reports as its snapshotter root
// (kubelet finds the file system from it). Layers are immutable, so each
// is measured once.
func (s *Store) Usage() (bytes, inodes uint64, mountpoint string) {
	entries, err := os.ReadDir(s.layersDir)
	if err != nil {
		s.log.Error().Err(err).Msg("measure the image store")
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !validHex(name) {
			continue
		}
		diffID := "sha256:" + name
		s.mu.Lock()
		u, ok := s.usage[diffID]
		s.mu.Unlock()
		if !ok {
			var err error
			if u, err = measure(filepath.Join(s.layersDir, name)); err != nil {
				continue // removed meanwhile
			}
			s.mu.Lock()
			s.usage[diffID] = u
			s.mu.Unlock()
		}
		bytes += u.bytes
		inodes += u.inodes
	}
	// The store's own files and directories, layers/ itself included.
	for _, p := range []string{s.dir, s.layersDir, filepath.Join(s.dir, recordsFile)} {
		if fi, err := os.Lstat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += uint64(st.Blocks) * 512
				inodes++
			}
		}
	}
	return bytes, inodes, s.dir
}

// measure walks the tree at root, counting each inode once.
func measure(root string) (diskUsage, error) {
	var u diskUsage
	seen := make(map[uint64]bool)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		u.bytes += uint64(st.Blocks) * 512
		u.inodes++
		return nil
	})
	return u, err
}
