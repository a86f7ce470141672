package jetlettest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerCgroupFile reads a file of the cgroup a running container's
// process is in, found through its verbose CRI status (the embedded
// runtime and containerd both put the pid in info["info"]) and
// /proc/<pid>/cgroup: v1name in the controller's hierarchy under cgroup v1,
// v2name under v2 (memory: memory.limit_in_bytes, memory.max).
func ContainerCgroupFile(t testing.TB, status *runtimeapi.ContainerStatusResponse, controller, v1name, v2name string) string {
	t.Helper()
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(status.GetInfo()["info"]), &info); err != nil || info.PID == 0 {
		t.Fatalf("no pid in the container's verbose status (%v): %v", err, status.GetInfo())
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], v2name)
		case slices.Contains(strings.Split(parts[1], ","), controller):
			file = filepath.Join("/sys/fs/cgroup", parts[1], parts[2], v1name)
		default:
			continue
		}
		if v, err := os.ReadFile(file); err == nil {
			return strings.TrimSpace(string(v))
		}
	}
	t.Fatalf("no %s cgroup file of pid %d: %s", controller, info.PID, data)
	return ""
}
