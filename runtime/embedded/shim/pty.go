package shim

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenPty opens a new pseudo-terminal of the devpts instance at
// root/dev/pts (root: "/", or a container's "/proc/<pid>/root"): the
// master, pollable (a Close ends a blocked read), and its slave, which
// becomes a process's terminal. A process sees its terminal's name
// (ttyname) only if that instance is its /dev/pts. Under a container's
// root, dev and dev/pts are opened through no symbolic link and dev/pts
// must be a devpts, whose ptmx and slaves are the kernel's: a container
// that replaced them cannot make the runtime open a file of the host
// (runc's CVE-2025-52565, whose console bind this is).
func OpenPty(root string) (master, slave *os.File, err error) {
	pts, err := openDevpts(root)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(pts)
	fd, err := unix.Openat(pts, "ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s/dev/pts/ptmx: %w", root, err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0) // unlockpt
	}
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("pty: %w", err)
	}
	name := strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Openat(pts, name, unix.O_RDWR|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s/dev/pts/%s: %w", root, name, err)
	}
	return master, os.NewFile(uintptr(sfd), "/dev/pts/"+name), nil
}

// openDevpts opens root/dev/pts (O_PATH) through no symbolic link and
// checks it is a devpts.
func openDevpts(root string) (int, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for _, name := range []string{"dev", "pts"} {
		if err != nil {
			break
		}
		dir := fd
		fd, err = unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
	}
	if err != nil {
		return -1, fmt.Errorf("open %s/dev/pts: %w", root, err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.DEVPTS_SUPER_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("%s/dev/pts is not a devpts (%v)", root, err)
	}
	return fd, nil
}

// SetWindowSize applies a client's terminal size to the terminal of master,
// leaving master pollable.
func SetWindowSize(master *os.File, width, height uint16) error {
	conn, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	err = conn.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: height, Col: width})
	})
	if err != nil {
		return err
	}
	return ioctlErr
}
