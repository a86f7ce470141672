package embedded

import (
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStopPodSandboxStopsContainers(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	c1 := h.run(sb, sbCfg, "one", "sleep", "1000")
	c2 := h.run(sb, sbCfg, "two", "sleep", "1000")
	if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{c1, c2} {
		st := h.status(id)
		if st.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || st.GetExitCode() != 137 {
			t.Fatalf("container after sandbox stop: %v", st)
		}
	}
	// A stopped sandbox takes no new containers.
	_, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("three", nil, "true")})
	wantCode(t, err, codes.FailedPrecondition)

	if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{c1, c2} {
		_, err := h.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		wantCode(t, err, codes.NotFound)
	}
}

func TestRemovePodSandboxKillsRunningContainers(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	c := h.run(sb, sbCfg, "one", "sleep", "1000")
	pid := h.pid(c)
	if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Fatalf("process %d survived RemovePodSandbox", pid)
	}
	resp, err := h.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(resp.GetContainers()) != 0 {
		t.Fatalf("containers after remove: %v, %v", resp, err)
	}
}
