package mountinfo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FirstUnder is a mount point at or below dir, "" when there is none: what
// Under answers, at the cost of dir's own tree rather than of every mount
// of the node. It walks dir comparing each entry's mount id (statx's
// STATX_MNT_ID, Linux 5.8) with that of dir's parent: an entry on another
// mount is a mount point, or below one found before it. Where the kernel
// gives no mount id it asks Under.
func FirstUnder(dir string) (string, error) {
	real, err := realPath(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	parent, ok, err := mountID(filepath.Dir(real))
	if err != nil {
		return "", err
	}
	if !ok {
		mounts, err := Under(real)
		if len(mounts) == 0 {
			return "", err
		}
		return mounts[0], err
	}
	found := ""
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		id, _, err := mountID(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if id != parent {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

// mountID is the id of the mount path is on (the one mounted there, for a
// mount point); ok is false when the kernel does not say.
func mountID(path string) (uint64, bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st); err != nil {
		return 0, false, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	return st.Mnt_id, st.Mask&unix.STATX_MNT_ID != 0, nil
}
