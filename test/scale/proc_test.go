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
