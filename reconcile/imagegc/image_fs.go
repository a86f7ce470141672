package imagegc

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// filesystemStats is the size of the file system holding a path and what
// of it an unprivileged writer may still use.
type filesystemStats struct {
	capacity, available int64
}

// statfs is the file system holding path as cAdvisor reports it to kubelet:
// its blocks, and the blocks available to unprivileged users.
func statfs(path string) (filesystemStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return filesystemStats{}, err
	}
	return filesystemStats{capacity: int64(st.Blocks) * st.Bsize, available: int64(st.Bavail) * st.Bsize}, nil
}

// imageFs is the image file system's size and space left, as kubelet's CRI
// stats provider finds them: the CRI names the file system (the mountpoint
// of its first image file system) but reports no capacity, so both come from
// the file system itself (cAdvisor's statfs, here m.statfs).
func (m *ImageGCManager) imageFs(ctx context.Context) (filesystemStats, error) {
	info, err := m.rt.ImageFsInfo(ctx)
	if err != nil {
		return filesystemStats{}, fmt.Errorf("image filesystem info: %w", err)
	}
	if len(info.GetImageFilesystems()) == 0 {
		return filesystemStats{}, errors.New("the runtime reports no image filesystem")
	}
	mountpoint := info.GetImageFilesystems()[0].GetFsId().GetMountpoint()
	if mountpoint == "" {
		return filesystemStats{}, errors.New("the runtime reports no mountpoint of its image filesystem")
	}
	fs, err := m.statfs(mountpoint)
	if err != nil {
		return filesystemStats{}, fmt.Errorf("image filesystem at %s: %w", mountpoint, err)
	}
	return fs, nil
}

// spaceToFree is kubelet's threshold arithmetic: the usage in whole percent
// (rounded up, as 100 less the available share rounded down), and when it
// is at or above the high threshold, the bytes to free for the usage to
// come down to the low one (0 otherwise). A file system of no capacity is
// an error (kubelet's InvalidDiskCapacity).
func spaceToFree(fs filesystemStats, p Policy) (usagePercent int, bytesToFree int64, err error) {
	if fs.capacity <= 0 {
		return 0, 0, fmt.Errorf("invalid capacity %d on image filesystem", fs.capacity)
	}
	available := min(fs.available, fs.capacity)
	usagePercent = 100 - int(available*100/fs.capacity)
	if usagePercent < p.HighThresholdPercent {
		return usagePercent, 0, nil
	}
	return usagePercent, fs.capacity*int64(100-p.LowThresholdPercent)/100 - available, nil
}
