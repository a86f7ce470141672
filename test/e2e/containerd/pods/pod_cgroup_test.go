package containerd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// podCgroupPath is where kubelet's (and jetlet's) cgroup of the Burstable
// pod uid is, below the hierarchy's root, with the runtime's cgroup driver.
func podCgroupPath(t *testing.T, s *suite, uid string) string {
	t.Helper()
	if s.systemdDriver(t) {
		u := strings.ReplaceAll(uid, "-", "_")
		return "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + u + ".slice"
	}
	return "/kubepods/burstable/pod" + uid
}

// cgroupDirs are the directories of the cgroup at path in every hierarchy
// mounted under /sys/fs/cgroup (v1), or the unified one (v2).
func cgroupDirs(path string) []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{filepath.Join("/sys/fs/cgroup", path)}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if e.IsDir() { // not the links (cpu, cpuacct)
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name(), path))
		}
	}
	return out
}

// A pod on containerd runs in kubelet's pod cgroup, which jetlet made with
// the pod's limits (kubelet's ResourceConfigForPod and --pod-max-pids), and
// which is gone once the pod is deleted.
func TestPodRunsInItsPodCgroup(t *testing.T) {
	s := newSuite(t)
	n := s.startNode("--pod-max-pids", "321")
	uid := s.uid("cgroup")
	path := podCgroupPath(t, s, uid)
	// Burstable (requests below limits): shares of 50m, a quota of 200m, a
	// memory limit of 64Mi, every container having both limits.
	st := n.applyRunning(uid, s.resizableJSON(uid, 1, "64Mi"))
	resp, err := s.cri.ContainerStatus(context.Background(), st.Containers[0].ContainerID, true)
	if err != nil {
		t.Fatal(err)
	}
	dir, v2 := jetlettest.ContainerCgroupDir(t, resp, "memory")
	if got := filepath.Dir(dir); !strings.HasSuffix(got, path) {
		t.Fatalf("the container's cgroup is %s; want it under the pod cgroup %s", dir, path)
	}
	t.Logf("the container's cgroup: %s (v2: %v)", dir, v2)
	// The pod cgroup's file: the container's cgroup's parent, in the
	// controller's hierarchy.
	read := func(controller, name string) string {
		d, _ := jetlettest.ContainerCgroupDir(t, resp, controller)
		b, err := os.ReadFile(filepath.Join(filepath.Dir(d), name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	want := map[string]string{}
	if v2 {
		// cpu.weight of 51 shares, runc's conversion: 1 + (51-2)*9999/262142.
		want["memory.max"], want["cpu.max"], want["cpu.weight"], want["pids.max"] = "67108864", "20000 100000", "2", "321"
		for name, w := range want {
			if got := read("memory", name); got != w {
				t.Errorf("pod cgroup %s = %s, want %s", name, got, w)
			}
		}
	} else {
		for _, f := range []struct{ controller, name, want string }{
			{"memory", "memory.limit_in_bytes", "67108864"},
			{"cpu", "cpu.cfs_quota_us", "20000"},
			{"cpu", "cpu.cfs_period_us", "100000"},
			{"cpu", "cpu.shares", "51"},
			{"pids", "pids.max", "321"},
		} {
			if got := read(f.controller, f.name); got != f.want {
				t.Errorf("pod cgroup %s = %s, want %s", f.name, got, f.want)
			}
		}
	}

	if r := n.waitResult(uid, n.publish(uid, deleteJSON(uid, 2, 2)), 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("delete: %s %q", r.Outcome, r.Error)
	}
	poll.Until(t, 60*time.Second, poll.Msg("the pod cgroup "+path+" removed after the pod's delete"), func() bool {
		for _, d := range cgroupDirs(path) {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
}
