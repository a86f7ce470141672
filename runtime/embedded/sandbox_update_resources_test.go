package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
)

// The sandbox's resources (LinuxPodSandboxConfig.resources: pod-level
// limits, KEP-2837) are its pod cgroup's from the start, and
// UpdatePodSandboxResources changes them live (KEP-5419), the container
// running on.
func TestPodCgroupHoldsTheSandboxResources(t *testing.T) {
	h := cgroupHarness(t)
	ctx := ctxT(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg := podConfig("podres-"+hex.EncodeToString(b[:]), nil)
	cfg.LogDirectory = filepath.Join(h.logs, cfg.Metadata.Name)
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{Resources: &runtimeapi.LinuxContainerResources{
		CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 64 << 20}}
	resp, err := h.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	sb := resp.GetPodSandboxId()
	id := h.create(sb, cfg, containerConfig("c", nil, "sleep", "600"))
	h.startC(id)
	check := func(memory int64, quota string) {
		t.Helper()
		if got := h.cgroupFileAbove(id, 1, "/memory/", "memory.limit_in_bytes", "memory.max"); got != strconv.FormatInt(memory, 10) {
			t.Errorf("pod cgroup memory limit %s, want %d", got, memory)
		}
		if h.rt.cgroups.Mode() == cgroups.V1 {
			if got := h.cgroupFileAbove(id, 1, "/cpu", "cpu.cfs_quota_us", ""); got != quota {
				t.Errorf("pod cgroup cpu.cfs_quota_us %s, want %s", got, quota)
			}
		} else if got := h.cgroupFileAbove(id, 1, "/cpu", "", "cpu.max"); got != quota+" 100000" {
			t.Errorf("pod cgroup cpu.max %s, want %s 100000", got, quota)
		}
	}
	check(64<<20, "50000")

	if _, err := h.rs.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: sb,
		Resources: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 100000, MemoryLimitInBytes: 128 << 20}}); err != nil {
		t.Fatal(err)
	}
	check(128<<20, "100000")
	if st := h.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container after the pod's resize: %s", st.GetState())
	}
	_, err = h.rs.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: "nope", Resources: &runtimeapi.LinuxContainerResources{}})
	wantCode(t, err, codes.NotFound)
}
