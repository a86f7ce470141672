// Package atomicfile writes files that a reader sees whole or not at all.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path through a temporary file in the same directory,
// synced and renamed into place, so a reader sees the old content or the new
// one, never a torn write, even after a crash. Until it gets perm, the
// temporary file is its owner's only, so a secret written with 0600 is never
// readable by anyone else.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, true)
}

// Replace is Write without its two fsyncs: a reader still sees the old
// content or the new one, but after a crash the file may hold either, or
// nothing. It is for a file made anew before each use (a pod's managed
// /etc/hosts, written at every container creation, as kubelet writes it
// without a sync; a sandbox's hostname, hosts and resolv.conf, as
// containerd's), where the syncs cost a pod's start and buy nothing.
func Replace(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
