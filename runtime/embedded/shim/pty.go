package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenPty opens a new pseudo-terminal of the devpts instance at dev/pts
// (dev/ptmx its multiplexer): the master, pollable (a Close ends a blocked
// read), and its slave, which becomes a process's terminal. A process sees
// its terminal's name (ttyname) only if that instance is its /dev/pts.
func OpenPty(dev string) (master, slave *os.File, err error) {
	fd, err := unix.Open(filepath.Join(dev, "ptmx"), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s/ptmx: %w", dev, err)
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
	slave, err = os.OpenFile(filepath.Join(dev, "pts", strconv.FormatUint(uint64(n), 10)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
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
