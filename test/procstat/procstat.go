// Package procstat reads a process's CPU time and resident memory from
// /proc, for benchmarks that report what a process they started costs.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100
// on every architecture Go runs Linux on.
const clockTick = 10 * time.Millisecond

// CPU is process pid's user plus system CPU time, and that of its reaped
// children.
func CPU(tb testing.TB, pid int) (self, children time.Duration) {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command name (which may hold spaces) start at
	// state, field 3 of proc(5).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	tick := func(field int) time.Duration {
		v, err := strconv.ParseInt(f[field-3], 10, 64)
		if err != nil {
			tb.Fatalf("/proc/%d/stat field %d: %v", pid, field, err)
		}
		return time.Duration(v) * clockTick
	}
	return tick(14) + tick(15), tick(16) + tick(17)
}

// RSS is process pid's resident memory in bytes.
func RSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}
