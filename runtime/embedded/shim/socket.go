package shim

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The shim's unix sockets are descriptors on Go's poller (non-blocking
// *os.File), not package net: net links cgo's resolver where a C compiler
// exists, which makes the shim a dynamic binary that costs each pod 1.5 MiB
// more resident memory (libc and the loader).

// listenUnix listens on the unix socket at path.
func listenUnix(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// acceptUnix waits for the next connection on lis.
func acceptUnix(lis *os.File) (*os.File, error) {
	rc, err := lis.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var acceptErr error
	err = rc.Read(func(fd uintptr) bool {
		nfd, _, acceptErr = unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		return !errors.Is(acceptErr, unix.EAGAIN)
	})
	if err == nil {
		err = acceptErr
	}
	if err != nil {
		return nil, fmt.Errorf("accept: %w", err)
	}
	return os.NewFile(uintptr(nfd), "conn"), nil
}

// dialUnix connects to the unix socket at path. The connect itself blocks
// (a unix socket's connect does not complete later as a TCP one does); the
// connection is non-blocking after.
func dialUnix(path string) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// sendMsg writes data with oob (SCM_RIGHTS) as one message on conn.
func sendMsg(conn *os.File, data, oob []byte) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	err = rc.Write(func(fd uintptr) bool {
		sendErr = unix.Sendmsg(int(fd), data, oob, nil, 0)
		return !errors.Is(sendErr, unix.EAGAIN)
	})
	if err != nil {
		return err
	}
	return sendErr
}

// recvMsg reads one message and its control data from conn.
func recvMsg(conn *os.File, buf, oob []byte) (n, oobn int, err error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var recvErr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, recvErr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(recvErr, unix.EAGAIN)
	})
	if err != nil {
		return 0, 0, err
	}
	return n, oobn, recvErr
}
