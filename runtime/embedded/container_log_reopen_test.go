package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestReopenContainerLog(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	// Prints a line each time it is poked through a file.
	poke := filepath.Join(h.shared, "poke")
	id := h.run(sb, sbCfg, "c", "sh", "-c", `echo first; while :; do if [ -e `+poke+` ]; then rm -f `+poke+`; echo second; fi; sleep 0.02; done`)
	path := h.status(id).GetLogPath()
	h.waitLog(path, "first")

	// Rotate as kubelet does: rename, then reopen.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rs.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("reopen did not create a new log: %v", err)
	}
	if err := os.WriteFile(poke, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitLog(path, "second")
	old, _ := os.ReadFile(path + ".1")
	if strings.Contains(string(old), "second") {
		t.Fatalf("rotated log got new output:\n%s", old)
	}

	if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	_, err := h.rs.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
}
