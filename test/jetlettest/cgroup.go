package jetlettest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerCgroupFile reads a file of the cgroup a running container's
// process is in, found through its pid (ContainerPID) and
// /proc/<pid>/cgroup: v1name in the controller's hierarchy under cgroup v1,
// v2name under v2 (memory: memory.limit_in_bytes, memory.max).
func ContainerCgroupFile(t testing.TB, status *runtimeapi.ContainerStatusResponse, controller, v1name, v2name string) string {
	t.Helper()
	dir, v2 := ContainerCgroupDir(t, status, controller)
	return readCgroupFile(t, dir, v1name, v2name, v2)
}

// PodCgroupFile reads a file of the pod cgroup of a running container (the
// embedded runtime's and kubelet's: its container cgroup's parent), as
// ContainerCgroupFile does.
func PodCgroupFile(t testing.TB, status *runtimeapi.ContainerStatusResponse, controller, v1name, v2name string) string {
	t.Helper()
	dir, v2 := ContainerCgroupDir(t, status, controller)
	return readCgroupFile(t, filepath.Dir(dir), v1name, v2name, v2)
}

// ContainerCgroupDir is the directory of the cgroup a running container's
// process is in, in the controller's hierarchy (v1) or the unified one
// (v2, then v2 is true).
func ContainerCgroupDir(t testing.TB, status *runtimeapi.ContainerStatusResponse, controller string) (dir string, v2 bool) {
	t.Helper()
	pid := ContainerPID(t, status)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			// The unified hierarchy: the one in use only when it is mounted
			// at the root (a hybrid host keeps its controllers in v1).
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				return filepath.Join("/sys/fs/cgroup", parts[2]), true
			}
		case slices.Contains(strings.Split(parts[1], ","), controller):
			return filepath.Join("/sys/fs/cgroup", parts[1], parts[2]), false
		}
	}
	t.Fatalf("no %s cgroup of pid %d: %s", controller, pid, data)
	return "", false
}

// ContainerPID is the host pid of a running container's process, from its
// verbose CRI status (the embedded runtime and containerd both put it in
// info["info"]).
func ContainerPID(t testing.TB, status *runtimeapi.ContainerStatusResponse) int {
	t.Helper()
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(status.GetInfo()["info"]), &info); err != nil || info.PID == 0 {
		t.Fatalf("no pid in the container's verbose status (%v): %v", err, status.GetInfo())
	}
	return info.PID
}

func readCgroupFile(t testing.TB, dir, v1name, v2name string, v2 bool) string {
	t.Helper()
	name := v1name
	if v2 {
		name = v2name
	}
	v, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// RemovePodCgroups removes what is left of kubelet's pod cgroup of pod uid in
// the cgroupfs layout (/kubepods[/burstable|/besteffort]/pod<uid>, in every
// hierarchy), which jetlet makes on a CRI runtime: a test that removes its
// pods from the runtime behind jetlet's back, jetlet stopped, leaves none
// behind. (The systemd driver's slices go with the guest they run in.)
func RemovePodCgroups(t testing.TB, uid string) {
	t.Helper()
	for _, root := range cgroupRoots() {
		for _, level := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			err := os.Remove(filepath.Join(root, level, "pod"+uid))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Logf("cleanup: pod cgroup of %s: %v", uid, err)
			}
		}
	}
}

// cgroupRoots are the hierarchies' roots: the v2 one, or each v1 one (not
// the links, as cpu to cpu,cpuacct).
func cgroupRoots() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out
}
