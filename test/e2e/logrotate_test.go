package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// A container that writes 70 MiB of logs leaves at most
// --container-log-max-files files: the current one and the newest rotated
// one as written (each about --container-log-max-size), the rest compressed,
// the oldest removed. The newest lines are all there.
func TestAChattyContainersLogIsRotated(t *testing.T) {
	dir := shortDir(t)
	n := startNode(t, dir, "", "--container-log-max-size", "10Mi", "--container-log-max-files", "5",
		"--container-log-monitor-interval", "100ms")
	// 70 MiB in 1 MiB chunks (1,024 lines of 1,023 x's and a newline), a
	// pause after each, then the last line.
	n.publish("chatty", podJSON("chatty", 1, "Always",
		`for i in $(seq 70); do head -c 1047552 /dev/zero | tr '\0' x | fold -w 1023; echo; sleep 0.05; done; echo done; exec sleep 600`))
	n.waitStatus("chatty", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	log := filepath.Join(dir, "logs", "default_p-chatty_chatty", "app", "0.log")
	var files []string
	poll.Until(t, 2*time.Minute, func() string {
		return fmt.Sprintf("the log to end with done and its rotation to settle, at most 5 files; files %s", strings.Join(files, " "))
	}, func() bool {
		files = jetlettest.RotatedLogSettled(log, 10<<20, 5, " stdout F done\n")
		return files != nil
	})
	var plain, compressed int64
	var lines int
	for i, f := range files {
		data := readLogFile(t, f)
		lines += bytes.Count(data, []byte("\n"))
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".gz") {
			compressed += info.Size()
			if i >= len(files)-2 {
				t.Errorf("%s is compressed; the newest rotated file and the current one are not", f)
			}
		} else {
			plain += info.Size()
		}
	}
	t.Logf("%d files, %d lines: %.1f MiB uncompressed, %.1f MiB compressed", len(files), lines, float64(plain)/(1<<20), float64(compressed)/(1<<20))
	// The current file and the newest rotated one, each about 10 MiB (a
	// rotation happens within the monitor interval of passing it).
	if plain > 24<<20 {
		t.Errorf("%d bytes uncompressed on disk, want about 20 MiB at most", plain)
	}
	// The oldest lines went with the oldest files: what is kept is 4
	// rotated files of about 10 MiB and the current one.
	if lines < 40*1024 || lines > 60*1024 {
		t.Errorf("%d lines kept, want 40 to 60 MiB of the newest of 70", lines)
	}
}

func readLogFile(t *testing.T, f string) []byte {
	t.Helper()
	r, err := containerlogs.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return data
}
