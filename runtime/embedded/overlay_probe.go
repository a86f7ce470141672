package embedded

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// overlayUsable reports whether overlayfs can stack layers with an upper
// dir on the file system of dir, as each container's root needs: a trial
// overlay is mounted in a temporary dir under dir, then taken down. When it
// cannot, the error says why, and containers' roots are copies of their
// images (shim.Rootfs.Copy).
func overlayUsable(dir string) (bool, error) {
	trial, err := os.MkdirTemp(dir, ".overlay-probe-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(trial)
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(trial, d), 0o700); err != nil {
			return false, err
		}
	}
	merged := filepath.Join(trial, "merged")
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", filepath.Join(trial, "lower"), filepath.Join(trial, "upper"), filepath.Join(trial, "work"))
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NODEV, opts); err != nil {
		return false, err
	}
	return true, unix.Unmount(merged, unix.MNT_DETACH)
}
