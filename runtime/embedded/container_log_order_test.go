package embedded

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/containerlogs"
)

// A container writes a line to stdout and one to stderr at once, fifty
// times, each pair once the previous one is in its log (it reads its own log
// through the shared volume), then a last pair and exits: its log holds every
// line in the order written, the last ones too as soon as the exit is
// reported. (Two lines written back to back reach the shim through two pipes
// at once: only the order the pipes became readable tells which came first.)
func TestStdoutAndStderrLinesAreLoggedInTheOrderWritten(t *testing.T) {
	h := newHarness(t)
	cfg := podConfig("order", nil)
	cfg.LogDirectory = filepath.Join(h.shared, "logs")
	resp, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(cfg.LogDirectory, "c.log")
	script := `for i in $(seq 50); do echo o$i; echo e$i >&2; until grep -q " stderr F e$i\$" ` + log + `; do :; done; done; ` +
		`echo last-out; echo last-err >&2; exit 3`
	id := h.create(resp.GetPodSandboxId(), cfg, containerConfig("c", nil, "sh", "-c", script))
	h.startC(id)
	if st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED); st.GetExitCode() != 3 {
		t.Fatalf("exit code %d, want 3", st.GetExitCode())
	}
	var want []string
	for i := 1; i <= 50; i++ {
		want = append(want, fmt.Sprintf("o%d", i), fmt.Sprintf("e%d", i))
	}
	want = append(want, "last-out", "last-err")

	// The file, as the shim wrote it.
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var written []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fields := strings.SplitN(sc.Text(), " ", 4); len(fields) == 4 {
			written = append(written, fields[3])
		}
	}
	if got := strings.Join(written, " "); got != strings.Join(want, " ") {
		t.Errorf("the log holds\n%s\nwant\n%s", got, strings.Join(want, " "))
	}
	// And as jetlet logs reads it.
	var out strings.Builder
	w := bufio.NewWriter(&out)
	if err := containerlogs.Read(ctxT(t), log, containerlogs.ReadOptions{Tail: -1}, w); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("read back\n%s\nwant\n%s", strings.Join(got, " "), strings.Join(want, " "))
	}
}
