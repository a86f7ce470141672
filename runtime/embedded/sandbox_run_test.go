package embedded

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSandboxLifecycle(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	cfg := podConfig("web", map[string]string{"app": "web"})
	cfg.Annotations = map[string]string{"note": "x"}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER},
	}}
	resp, err := h.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetPodSandboxId()

	st, err := h.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	s := st.GetStatus()
	// On the node's network it has no address of its own, as with containerd.
	if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || s.GetNetwork().GetIp() != "" ||
		s.GetMetadata().GetName() != "web" || s.GetLabels()["app"] != "web" || s.GetAnnotations()["note"] != "x" ||
		s.GetCreatedAt() == 0 {
		t.Fatalf("status = %v", s)
	}
	ns := s.GetLinux().GetNamespaces().GetOptions()
	if ns.GetNetwork() != runtimeapi.NamespaceMode_NODE || ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		t.Fatalf("namespace options = %v", ns)
	}

	// The same name is reserved while the sandbox exists.
	_, err = h.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	wantCode(t, err, codes.AlreadyExists)

	for range 2 {
		if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	st, err = h.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil || st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("after stop: %v, %v", st, err)
	}
	for range 2 {
		if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = h.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	wantCode(t, err, codes.NotFound)

	// Unknown ids: stop and remove succeed, as containerd.
	if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: "nope"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "nope"}); err != nil {
		t.Fatal(err)
	}
	// The name is free again.
	if _, err := h.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
}

func TestRunPodSandboxNeedsMetadata(t *testing.T) {
	h := newHarness(t)
	_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}})
	wantCode(t, err, codes.InvalidArgument)
}

// The runtime's driver is cgroupfs: a parent in the systemd driver's form is
// refused, not made as directories systemd does not know.
func TestRunPodSandboxRefusesASystemdCgroupParent(t *testing.T) {
	h := newHarness(t)
	for _, parent := range []string{
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice",
		"kubepods-pod1.slice",
		"system.slice:cri-containerd:abc",
	} {
		cfg := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "1"},
			Linux:    &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent},
		}
		_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
		wantCode(t, err, codes.InvalidArgument)
		if err != nil && !strings.Contains(err.Error(), "cgroup driver is cgroupfs") {
			t.Errorf("%s: %v, want it to say the driver", parent, err)
		}
	}
}
