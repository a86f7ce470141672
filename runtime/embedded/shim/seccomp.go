package shim

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// install loads the filter on the calling thread (no SECCOMP_FILTER_FLAG_TSYNC:
// the thread that installs it is the one that executes the command, and the
// filter passes to the command across execve).
func (s *Seccomp) install() error {
	if len(s.Filter) == 0 || len(s.Filter)%8 != 0 {
		return fmt.Errorf("seccomp: a filter of %d bytes is not a BPF program", len(s.Filter))
	}
	prog := make([]unix.SockFilter, len(s.Filter)/8)
	for i := range prog {
		b := s.Filter[8*i:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:]),
		}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(s.Flags), uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: install the filter: %w", errno)
	}
	return nil
}
