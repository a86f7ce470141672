package shim

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// writeSysctl writes value to the sysctl name ("net.ipv4.ip_forward") as
// the file under /proc/sys it names, opened beneath /proc/sys through no
// symbolic link and checked to be on procfs: no name, and no mount over
// /proc, can send the write to another file (runc's CVE-2025-52881).
func writeSysctl(name, value string) error {
	rel := strings.ReplaceAll(name, ".", "/") // no ".." is left
	dir, err := unix.Open("/proc/sys", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	fd, err := unix.Openat2(dir, rel, &how)
	if errors.Is(err, unix.ENOSYS) { // Linux before 5.6
		fd, err = unix.Openat(dir, rel, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "/proc/sys/"+rel)
	defer f.Close()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return err
	}
	if fs.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("%s is not on procfs", f.Name())
	}
	_, err = f.WriteString(value)
	return err
}
