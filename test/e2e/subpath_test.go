package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/internal/mountinfo"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// subPathPod is a pod of the baseline level (an emptyDir, no hostPath):
// an init container runs plant in the emptyDir at /ed, then the app mounts
// the emptyDir's subPaths (mounts: JSON volumeMounts without the volume's
// name) and runs script, which says what it saw in its termination message.
func subPathPod(uid, plant, mounts, script string) string {
	return podWithSpec(uid, `"restartPolicy":"Never","volumes":[{"name":"ed","emptyDir":{}}],
	  "initContainers":[{"name":"plant","image":"busybox:1.36","volumeMounts":[{"name":"ed","mountPath":"/ed"}],"command":`+shellCmd(plant)+`}],
	  "containers":[{"name":"app","image":"busybox:1.36","volumeMounts":`+mounts+`,"command":`+shellCmd(script)+`}]`)
}

// The attack of CVE-2017-1002101 through `jetlet run`, with nothing but an
// emptyDir: an init container links the node's root into the volume
// (absolutely, or climbing with ..), and the app mounts the link as its
// subPath to read the node's /etc/shadow and the data dir's seed. The app
// never starts: its status says CreateContainerConfigError and why. A
// subPath that stays in the volume (a directory, a symlink inside it, a
// file) works.
func TestASubPathCannotLeaveItsVolume(t *testing.T) {
	requireRoot(t)
	dataDir, err := os.MkdirTemp("/var/tmp", "je2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	n := startNode(t, dataDir, "")
	seed := filepath.Join(dataDir, "nats-client.nk")
	if _, err := os.Stat(seed); err != nil {
		t.Fatalf("the node has no seed to steal: %v", err)
	}
	steal := fmt.Sprintf(`echo "shadow $(cat /h/etc/shadow | wc -c) seed $(cat /h%s | wc -c)" | tee /dev/termination-log`, seed)
	attacks := map[string]string{
		"abs": "/",
		"rel": strings.Repeat("../", 16),
	}
	for uid, target := range attacks {
		n.publish(uid, subPathPod(uid, "ln -s "+target+" /ed/root", `[{"name":"ed","mountPath":"/h","subPath":"root"}]`, steal))
	}
	n.publish("fine", subPathPod("fine", "mkdir -p /ed/dir/sub && echo inside > /ed/dir/file && ln -s dir /ed/link",
		`[{"name":"ed","mountPath":"/d","subPath":"dir"},{"name":"ed","mountPath":"/l","subPath":"link/sub"},{"name":"ed","mountPath":"/f","subPath":"link/file"},{"name":"ed","mountPath":"/new","subPath":"made/here"}]`,
		`echo "$(cat /d/file) $(cat /f) $(ls /d | tr '\n' ' ')$(ls -d /l /new)" > /dev/termination-log`))

	app := func(st *schemas.PodStatus) *schemas.ContainerStatus {
		for i := range st.Containers {
			if st.Containers[i].Name == "app" {
				return &st.Containers[i]
			}
		}
		return nil
	}
	for uid, target := range attacks {
		st := n.waitStatus(uid, 60*time.Second, func(st *schemas.PodStatus) bool {
			c := app(st)
			if c != nil && c.State == schemas.ContainerExited {
				t.Fatalf("the app of the link to %q ran and saw: %q", target, c.Message)
			}
			return c != nil && c.Reason == "CreateContainerConfigError"
		})
		if msg := app(st).Message; !strings.Contains(msg, `subPath "root": resolves outside the volume`) {
			t.Errorf("the link to %q: the app waits with %q, want the subPath named as leaving its volume", target, msg)
		}
	}
	st := n.waitStatus("fine", 60*time.Second, func(st *schemas.PodStatus) bool {
		c := app(st)
		return c != nil && c.State == schemas.ContainerExited
	})
	if c := app(st); c.ExitCode != 0 || strings.TrimSpace(c.Message) != "inside inside file sub /l\n/new" {
		t.Errorf("the app of subPaths inside the volume exited %d saying %q, want 0 and %q", c.ExitCode, c.Message, "inside inside file sub /l\n/new")
	}

	// The binds are jetlet's, under the pod's data dir; a delete collects
	// the pod's volumes, the binds unmounted first.
	pod := filepath.Join(dataDir, "pods", "fine")
	if mounted, err := mountinfo.IsMountPoint(filepath.Join(pod, "volume-subpaths", "ed", "app", "0")); err != nil || !mounted {
		t.Fatalf("the bind of subPath dir: mounted %v, %v", mounted, err)
	}
	n.publish("fine", deleteJSON("fine", 2, 5))
	poll.Until(t, 60*time.Second, poll.Msg("the deleted pod's data dir removed"), func() bool {
		_, err := os.Stat(pod)
		return os.IsNotExist(err)
	})
	// The attack pods have no bind: nothing is mounted under pods/.
	if mounts, err := mountinfo.Under(filepath.Dir(pod)); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left under the pods' data dirs: %v %v", mounts, err)
	}
}
