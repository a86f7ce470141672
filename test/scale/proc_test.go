package scale_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/natscluster"
)

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100
// on every architecture Go runs Linux on.
const clockTick = 10 * time.Millisecond

// serverPID finds the process of a cluster server by its command line
// (natscluster does not expose the process; it starts each with -p <port>).
func serverPID(b *testing.B, s *natscluster.Server) int {
	b.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(string(data), "\x00")
		if i := slices.Index(args, "-p"); i >= 0 && i+1 < len(args) && args[i+1] == strconv.Itoa(s.Port) &&
			strings.HasSuffix(args[0], "nats-server") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			return pid
		}
	}
	b.Fatalf("no nats-server process listening on %d", s.Port)
	return 0
}

// processCPU is the user plus system CPU time process pid has used.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses:
	// state is field 3, utime 14, stime 15.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(utime+stime) * clockTick
}

// processRSS is the resident memory of process pid in bytes.
func processRSS(b *testing.B, pid int) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}

// selfCPU is the CPU time the benchmark's own process (the nodes and the
// publisher) has used.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the machine's 1, 5 and 15 minute load averages and its CPU
// count.
func loadAverage(b *testing.B) string {
	b.Helper()
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data))
	return fmt.Sprintf("%s %s %s on %d CPUs", f[0], f[1], f[2], runtime.NumCPU())
}
