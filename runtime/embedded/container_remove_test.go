package embedded

import (
	"os"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRemoveContainer(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sh", "-c", "echo hi; exec sleep 1000")
	st := h.status(id)
	h.waitLog(st.GetLogPath(), "hi")
	pid := h.pid(id)
	dir := h.rt.containerDir(id)
	// Removing a running container kills it first.
	for range 2 {
		if _, err := h.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if processAlive(pid) {
		t.Fatalf("process %d survived RemoveContainer", pid)
	}
	_, err := h.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	wantCode(t, err, codes.NotFound)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("container dir still there: %v", err)
	}
	if _, err := os.Stat(st.GetLogPath()); err != nil {
		t.Fatalf("the log must stay: %v", err)
	}
	if _, err := h.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: "unknown"}); err != nil {
		t.Fatal(err)
	}
	// The name is free again.
	h.create(sb, sbCfg, containerConfig("c", nil, "true"))
}
