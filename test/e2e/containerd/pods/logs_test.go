package containerd_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// jetlet rotates a chatty container's log through containerd's
// ReopenContainerLog: 70 MiB written leave at most 5 files, all but the
// newest two compressed.
func TestAChattyContainersLogIsRotated(t *testing.T) {
	s := newSuite(t)
	n := s.startNode("--container-log-max-size", "10Mi", "--container-log-max-files", "5", "--container-log-monitor-interval", "100ms")
	uid := s.uid("chatty")
	n.publish(uid, s.podJSON(uid, 1, "Always",
		`for i in $(seq 70); do head -c 1047552 /dev/zero | tr '\0' x | fold -w 1023; echo; sleep 0.05; done; echo done; `+untilTerm))
	st := n.waitStatus(uid, 60*time.Second, "Running", running)
	resp, err := s.cri.ContainerStatus(context.Background(), st.Containers[0].ContainerID, false)
	if err != nil {
		t.Fatal(err)
	}
	log := resp.GetStatus().GetLogPath()
	var files []string
	poll.Until(t, 2*time.Minute, func() string {
		return "the log to end with done and its rotation to settle, at most 5 files; files " + strings.Join(files, " ")
	}, func() bool {
		files = jetlettest.RotatedLogSettled(log, 10<<20, 5, " stdout F done\n")
		return files != nil
	})
	var plain int64
	lines := 0
	for i, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".gz") {
			if i >= len(files)-2 {
				t.Errorf("%s is compressed; the newest rotated file and the current one are not", f)
			}
		} else {
			plain += info.Size()
		}
		r, err := containerlogs.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	t.Logf("%d files, %d lines, %.1f MiB uncompressed", len(files), lines, float64(plain)/(1<<20))
	if plain > 24<<20 {
		t.Errorf("%d bytes uncompressed on disk, want about 20 MiB at most", plain)
	}
	// Each of the 4 rotated files passed 10 MiB before it was rotated, and a
	// line of a file is the 1,023 bytes written, a newline and the CRI
	// prefix (a timestamp of at most 30 bytes and " stdout F "): 1,064
	// bytes at most. So at least 40 MiB / 1,064 lines are kept (the current
	// file adds what came after), at most the 60 of 70 MiB written.
	const lineBytes = 1023 + 1 + 30 + len(" stdout F ")
	if min, max := 4*(10<<20)/lineBytes, 60*1024; lines < min || lines > max {
		t.Errorf("%d lines kept, want %d to %d: the 4 rotated files of 10 MiB and the current one, of the newest of 70 MiB", lines, min, max)
	}
}
