// Package kernel tells which Linux kernel runs: features that arrived in a
// release (process_vm_readv's seccomp rule, idmapped tmpfs) are chosen by it.
package kernel

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Release is the running kernel's release (uname -r); "?" when unknown.
func Release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// AtLeast reports whether the running kernel is at least major.minor.
func AtLeast(major, minor int) bool {
	var maj, min int
	if _, err := fmt.Sscanf(Release(), "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}
