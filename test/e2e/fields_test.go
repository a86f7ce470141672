package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// fieldsPodJSON is a pod whose container writes what it sees of the resource
// downward API and of its Memory emptyDir to out (a hostPath volume).
func fieldsPodJSON(uid, out string) string {
	script := `v="$JETLET_ROOTFS"; echo "$CPU_M $MEM_MI $CPU_REQ_M $EPH_SET" > "$v/out/env.tmp"; ` +
		`stat -f -c %T "$v/ram/." >> "$v/out/env.tmp"; mv "$v/out/env.tmp" "$v/out/env"; exec sleep 300`
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":2,
	      "volumes":[{"name":"out","hostPath":{"path":%q,"type":"Directory"}},
	                 {"name":"ram","emptyDir":{"medium":"Memory","sizeLimit":"8Mi"}}],
	      "containers":[{"name":"app","image":"busybox:1.36","imagePullPolicy":"IfNotPresent","command":%s,
	        "resources":{"limits":{"cpu":"1500m","memory":"64Mi"},"requests":{"cpu":"250m"}},
	        "volumeMounts":[{"name":"out","mountPath":"/out"},{"name":"ram","mountPath":"/ram"}],
	        "env":[
	          {"name":"CPU_M","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"1m"}}},
	          {"name":"MEM_MI","valueFrom":{"resourceFieldRef":{"resource":"limits.memory","divisor":"1Mi"}}},
	          {"name":"CPU_REQ_M","valueFrom":{"resourceFieldRef":{"containerName":"app","resource":"requests.cpu","divisor":"1m"}}},
	          {"name":"EPH_SET","valueFrom":{"resourceFieldRef":{"resource":"limits.ephemeral-storage"}}}]}]}}}`,
		uid, uid, out, cmd)
}

// Through `jetlet run` on the embedded runtime: resourceFieldRef env values
// (an unset limit reads the node's allocatable) and an emptyDir of medium
// Memory, which is a tmpfs when jetlet runs as root and a Rejected intent
// naming the field when it does not.
func TestResourceFieldRefAndMemoryEmptyDir(t *testing.T) {
	dataDir := shortDir(t)
	// Registered before the node starts, so it runs after jetlet is gone: a
	// test that fails before the delete below leaves no tmpfs mounted.
	t.Cleanup(func() { unmountUnder(t, dataDir) })
	n := startNode(t, dataDir, "", mountsTheHost...)
	out := t.TempDir()
	n.publish("fields", fieldsPodJSON("fields", out))
	r := n.results("fields", 1)[0]
	if os.Geteuid() != 0 {
		if r.Outcome != schemas.OutcomeRejected || !strings.Contains(r.Error, "pod.spec.volumes[1].emptyDir.medium") {
			t.Fatalf("not root: %s %q, want Rejected naming the Memory emptyDir", r.Outcome, r.Error)
		}
		return
	}
	if r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s %+v", r.Outcome, r.Error, r.Actions)
	}
	var got string
	poll.Until(t, 30*time.Second, func() string { return "the container's report in " + out }, func() bool {
		b, err := os.ReadFile(filepath.Join(out, "env"))
		got = string(b)
		return err == nil
	})
	fields := strings.Fields(got)
	if len(fields) != 5 || fields[0] != "1500" || fields[1] != "64" || fields[2] != "250" || fields[3] == "" || fields[3] == "0" || fields[4] != "tmpfs" {
		t.Errorf("the container saw %q: want limits.cpu 1500 (1m), limits.memory 64 (1Mi), requests.cpu 250, the node's ephemeral storage, a tmpfs", got)
	}
	t.Logf("the container saw %q", got)

	// The delete collects the pod's volumes: the tmpfs is unmounted.
	n.publish("fields", deleteJSON("fields", 2, 2))
	if r := n.results("fields", 2)[1]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("delete: %s %s", r.Outcome, r.Error)
	}
	n.waitEvent("fields", schemas.EventPodTerminated, 30*time.Second, nil)
	if left := mountsUnder(t, dataDir); len(left) > 0 {
		t.Errorf("mounts left after the delete: %v", left)
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// unmountUnder unmounts whatever a failed test left mounted under dir.
func unmountUnder(t *testing.T, dir string) {
	for _, m := range mountsUnder(t, dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
}
