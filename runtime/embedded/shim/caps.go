package shim

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// capabilityNames are the Linux capabilities by number.
var capabilityNames = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// defaultCapabilities are containerd's capabilities for a container that is
// not privileged.
var defaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// DefaultCapabilities are containerd's capabilities for a container that is
// not privileged and asks for no change.
func DefaultCapabilities() []string { return append([]string(nil), defaultCapabilities...) }

// AllCapabilities are the names of every capability this package knows, in
// number order (what "ALL" and a privileged container get).
func AllCapabilities() []string { return append([]string(nil), capabilityNames[:]...) }

// IsCapability reports whether name ("CAP_CHOWN") is a capability this
// package knows.
func IsCapability(name string) bool {
	_, ok := capabilityNumber(name)
	return ok
}

func capabilityNumber(name string) (int, bool) {
	for i, n := range capabilityNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// capSet is a set of capabilities as the kernel's bit mask.
type capSet uint64

func parseCapSet(names []string) (capSet, error) {
	var s capSet
	for _, n := range names {
		i, ok := capabilityNumber(n)
		if !ok {
			return 0, fmt.Errorf("unknown capability %q", n)
		}
		s |= 1 << i
	}
	return s, nil
}

func (s capSet) has(i int) bool { return s&(1<<i) != 0 }

// lastCapability is the highest capability number the running kernel
// knows, as the kernel answers PR_CAPBSET_READ (EINVAL past it). Not
// /proc/sys/kernel/cap_last_cap: the init reads after the pivot, in the
// container's /proc, where a volume over that file would keep every
// capability above the number it says in the bounding set, and a root
// command would gain them all at execve.
func lastCapability() (int, error) {
	for i := 0; i < 64; i++ {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(i), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) && i > 0 {
				return i - 1, nil
			}
			return 0, fmt.Errorf("capability %d: %w", i, err)
		}
	}
	return 63, nil
}

// capabilities are a process's capability sets, parsed.
type capabilities struct {
	bounding, effective, permitted, inheritable, ambient capSet
}

func parseCapabilities(c Capabilities) (*capabilities, error) {
	var caps capabilities
	for _, set := range []struct {
		names []string
		dst   *capSet
	}{
		{c.Bounding, &caps.bounding}, {c.Effective, &caps.effective}, {c.Permitted, &caps.permitted},
		{c.Inheritable, &caps.inheritable}, {c.Ambient, &caps.ambient},
	} {
		s, err := parseCapSet(set.names)
		if err != nil {
			return nil, err
		}
		*set.dst = s
	}
	return &caps, nil
}

// dropBounding removes from the calling thread's bounding set every
// capability not in caps.bounding (it needs CAP_SETPCAP, so it runs first).
func (caps *capabilities) dropBounding() error {
	last, err := lastCapability()
	if err != nil {
		return fmt.Errorf("capabilities: %w", err)
	}
	for i := 0; i <= last; i++ {
		if caps.bounding.has(i) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(i), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", i, err)
		}
	}
	return nil
}

// apply sets the calling thread's effective, permitted, inheritable and
// ambient sets, each limited to what the thread holds: a capability the
// runtime itself lacks cannot be given (a privileged container gets all the
// host gave the runtime).
func (caps *capabilities) apply() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var held [2]unix.CapUserData
	if err := unix.Capget(&hdr, &held[0]); err != nil {
		return fmt.Errorf("get capabilities: %w", err)
	}
	permitted := capSet(held[0].Permitted) | capSet(held[1].Permitted)<<32
	caps.effective &= permitted
	caps.permitted &= permitted
	caps.inheritable &= permitted
	caps.ambient &= permitted
	var data [2]unix.CapUserData // bits 0-31, then 32-63
	for w := range data {
		shift := 32 * w
		data[w] = unix.CapUserData{
			Effective:   uint32(caps.effective >> shift),
			Permitted:   uint32(caps.permitted >> shift),
			Inheritable: uint32(caps.inheritable >> shift),
		}
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for i := range capabilityNames {
		if !caps.ambient.has(i) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(i), 0, 0); err != nil {
			return fmt.Errorf("raise ambient capability %s: %w", capabilityNames[i], err)
		}
	}
	return nil
}
