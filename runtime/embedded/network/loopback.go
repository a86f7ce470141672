package network

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

// LoopbackOnly is the network of pods when no CNI network is usable: a
// namespace of their own with only lo, up. They reach nothing outside it and
// nothing outside reaches them; Add gives them no IP.
type LoopbackOnly struct{}

// Add brings up lo in the pod's namespace.
func (LoopbackOnly) Add(_ context.Context, pod Pod) ([]string, error) {
	return nil, in([]Namespace{{Path: pod.NetNS, Type: unix.CLONE_NEWNET}}, upLoopback)
}

// Del has nothing to release: the namespace goes with its file.
func (LoopbackOnly) Del(context.Context, Pod) error { return nil }

// upLoopback sets lo up in the calling thread's network namespace, as
// `ip link set lo up` (the kernel then gives it 127.0.0.1 and ::1).
func upLoopback() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(loInterface)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: read flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	return nil
}
