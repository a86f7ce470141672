package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/userns"
	"github.com/jetlet/jetlet/schemas"
)

// usernsPod is a pod with hostUsers false whose app writes into its
// emptyDir what it sees, and whose "unmasked" container (procMount
// Unmasked) says whether /proc/keys is masked.
func usernsPod(name string) *corev1.Pod {
	app := shell("app", `echo hi > /data/f; stat -c %u /data/f > /data/owner; stat -c %F /proc/keys > /data/masked; exec sleep 1000`)
	unmasked := shell("unmasked", `stat -c %F /proc/keys > /data/unmasked; exec sleep 1000`)
	unmasked.SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
	pod := makePod(name, corev1.RestartPolicyAlways, app, unmasked)
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	return pod
}

// firstHostUID is the host uid the pod's root is: where its app's uid_map,
// read from the host, maps uid 0.
func (e *env) firstHostUID(pod *corev1.Pod) uint32 {
	e.t.Helper()
	s := e.waitFor(pod, "app running", newestState("app", kubecontainer.ContainerRunning))
	resp, err := e.client.ContainerStatus(ctx(e.t), s.FindContainerStatusByName("app").ID, true)
	if err != nil {
		e.t.Fatal(err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil {
		e.t.Fatal(err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", info.PID))
	if err != nil {
		e.t.Fatal(err)
	}
	var inside, host, length uint32
	if _, err := fmt.Sscan(string(data), &inside, &host, &length); err != nil || inside != 0 || length != userns.RangeLength {
		e.t.Fatalf("pod %s's uid_map is %q (%v), want 65536 ids from 0", pod.Name, data, err)
	}
	if host == 0 {
		e.t.Fatalf("pod %s's root is the host's root", pod.Name)
	}
	return host
}

// volumeFile waits for a file the pod writes in its emptyDir and returns it.
func (e *env) volumeFile(pod *corev1.Pod, name string) string {
	e.t.Helper()
	path := filepath.Join(e.dir, "data", "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "data", name)
	var data []byte
	e.waitFor(pod, path, func(*kubecontainer.PodStatus) bool {
		data, _ = os.ReadFile(path)
		return len(data) > 0
	})
	return strings.TrimSpace(string(data))
}

// Pods with hostUsers false run in user namespaces of their own: disjoint
// ranges of host ids, their root never the host's, their emptyDir theirs
// as root (idmapped: what root writes there is the host's uid 0's, as on
// containerd), procMount Unmasked honoured. A restarted jetlet keeps each
// pod's range and gives none of them to a new pod; a removed pod's range
// goes to the next one.
func TestPodsWithoutHostUsersGetTheirOwnUserNamespaces(t *testing.T) {
	e := newEnv(t)
	st, err := e.client.Status(ctx(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.GetRuntimeHandlers()[0].GetFeatures().GetUserNamespaces() {
		t.Skip("the embedded runtime has no user namespaces here")
	}
	a, b := usernsPod("a"), usernsPod("b")
	mustSucceed(t, e.sync(a))
	mustSucceed(t, e.sync(b))
	firstA, firstB := e.firstHostUID(a), e.firstHostUID(b)
	if firstA%userns.RangeLength != 0 || firstB%userns.RangeLength != 0 || firstA == firstB {
		t.Errorf("pods a and b start at host uids %d and %d, want disjoint aligned ranges", firstA, firstB)
	}
	if got := e.volumeFile(a, "owner"); got != "0" {
		t.Errorf("a file root wrote in the emptyDir is uid %s in the pod, want 0", got)
	}
	var st0 unix.Stat_t
	if err := unix.Stat(filepath.Join(e.dir, "data", "pods", "uid-a", "volumes", "kubernetes.io~empty-dir", "data", "f"), &st0); err != nil || st0.Uid != 0 {
		t.Errorf("on the host the file is uid %d (%v), want 0 (idmapped)", st0.Uid, err)
	}
	if masked, unmasked := e.volumeFile(a, "masked"), e.volumeFile(a, "unmasked"); masked != "character special file" || unmasked != "regular empty file" {
		t.Errorf("/proc/keys is a %q by default and a %q with procMount Unmasked, want masked and not", masked, unmasked)
	}

	// jetlet restarts: the pods keep their ranges, and a new one gets
	// neither.
	e.newManager()
	r := e.sync(a)
	mustSucceed(t, r)
	if kills := actionsOf(r, schemas.ActionKillContainer); len(kills) != 0 {
		t.Errorf("a restarted jetlet killed %+v", kills)
	}
	c := usernsPod("c")
	mustSucceed(t, e.sync(c))
	if firstC := e.firstHostUID(c); firstC == firstA || firstC == firstB {
		t.Errorf("after a restart pod c got a range in use: %d", firstC)
	}

	// Pod a goes: its range is free again.
	e.mgr.KillPod(ctx(t), a, nil, nil)
	if err := e.mgr.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(uid string) bool { return uid == "uid-a" })); err != nil {
		t.Fatal(err)
	}
	d := usernsPod("d")
	mustSucceed(t, e.sync(d))
	if firstD := e.firstHostUID(d); firstD != firstA {
		t.Errorf("pod d starts at host uid %d, want a's released %d", firstD, firstA)
	}
}
