package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/mountinfo"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/test/fakecri"
	"github.com/jetlet/jetlet/test/pathswap"
)

// subPathTest is a pod of one container whose volume "ed" is an emptyDir,
// its directory made, ready for the test to fill.
type subPathTest struct {
	m   *Kuberuntime
	pod *corev1.Pod
	ed  string
}

func newSubPathTest(t *testing.T, mounts ...corev1.VolumeMount) *subPathTest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a subPath is bind-mounted, which needs root; without it a subPath is an error")
	}
	m, _ := newTestManager(t, fakecri.New())
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}, VolumeMounts: mounts})
	pod.Spec.Volumes = []corev1.Volume{{Name: "ed", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	ed := m.emptyDirPath("uid1", "ed")
	must(t, m.setUpEmptyDir(emptyDirPluginDir, ed, pod, pod.Spec.Volumes[0].EmptyDir))
	return &subPathTest{m: m, pod: pod, ed: ed}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (st *subPathTest) mounts() ([]*runtimeapi.Mount, error) {
	return st.m.makeMounts(st.pod, &st.pod.Spec.Containers[0], envMapping(nil))
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	must(t, unix.Stat(a, &sa))
	must(t, unix.Stat(b, &sb))
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// The attack of CVE-2017-1002101: an init container links the host's root
// (absolute, or climbing with ..) into an emptyDir, and the app mounts the
// link as its subPath. jetlet refuses it, names what is wrong, and mounts
// nothing.
func TestSubPathThroughASymlinkOutOfTheVolumeIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, target, subPath string }{
		{"absolute", "/", "root"},
		{"absolute, deeper", "/", "root/etc"},
		{"relative", "../../../../../../../../..", "root"},
		{"in the middle", "/etc", "root/passwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newSubPathTest(t, corev1.VolumeMount{Name: "ed", MountPath: "/h", SubPath: tc.subPath})
			must(t, os.Symlink(tc.target, filepath.Join(st.ed, "root")))
			_, err := st.mounts()
			if err == nil || !strings.Contains(err.Error(), `subPath "`+tc.subPath+`": resolves outside the volume`) {
				t.Fatalf("makeMounts = %v, want the subPath refused as resolving outside the volume", err)
			}
			if strings.Contains(err.Error(), st.m.cfg.DataDir) {
				t.Errorf("the error names the host's paths: %v", err)
			}
			if mounts, _ := mountinfo.Under(st.m.podDataDir("uid1")); len(mounts) > 0 {
				t.Errorf("mounted %v", mounts)
			}
		})
	}
}

// A subPath that stays inside the volume, through a directory, a symlink
// inside it or to a file, is bound from what was opened on
// volume-subpaths/<volume>/<container>/<index>: the pod swapping a symlink
// to / in its place afterwards changes nothing of the bind; a container
// created again reuses it, or binds the new object when the pod made
// another one there; GC unmounts it and never reaches the volume's files
// through it.
func TestSubPathIsBoundFromTheObjectOpened(t *testing.T) {
	st := newSubPathTest(t,
		corev1.VolumeMount{Name: "ed", MountPath: "/whole"},
		corev1.VolumeMount{Name: "ed", MountPath: "/d", SubPath: "dir"},
		corev1.VolumeMount{Name: "ed", MountPath: "/l", SubPath: "link/sub"},
		corev1.VolumeMount{Name: "ed", MountPath: "/f", SubPath: "dir/file"},
		corev1.VolumeMount{Name: "ed", MountPath: "/new", SubPath: "made/here"},
	)
	must(t, os.MkdirAll(filepath.Join(st.ed, "dir", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(st.ed, "dir", "file"), []byte("inside"), 0o644))
	must(t, os.Symlink("dir", filepath.Join(st.ed, "link")))
	ms, err := st.mounts()
	must(t, err)
	want := []string{"dir", "dir/sub", "dir/file", "made/here"}
	for i, rel := range want {
		bind := ms[i+1].HostPath
		if wantBind := filepath.Join(st.m.podDataDir("uid1"), "volume-subpaths", "ed", "app", strconv.Itoa(i+1)); bind != wantBind {
			t.Errorf("subPath %s bound on %s, want %s", rel, bind, wantBind)
		}
		if mounted, err := mountinfo.IsMountPoint(bind); err != nil || !mounted {
			t.Errorf("%s is not a mount point: %v", bind, err)
		}
		if !sameFile(t, bind, filepath.Join(st.ed, rel)) {
			t.Errorf("the bind of %s is not it", rel)
		}
	}
	if fi, err := os.Stat(filepath.Join(st.ed, "made", "here")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("a missing subPath is made with the volume's mode 0777: %v %v", fi, err)
	}

	// The pod swaps its directory for a link to the host's root.
	must(t, os.Rename(filepath.Join(st.ed, "dir"), filepath.Join(st.ed, "moved")))
	must(t, os.Symlink("/", filepath.Join(st.ed, "dir")))
	if data, err := os.ReadFile(filepath.Join(ms[1].HostPath, "file")); err != nil || string(data) != "inside" {
		t.Errorf("the bind after the swap reads %q, %v: want the volume's file", data, err)
	}
	if _, err := st.mounts(); err == nil || !strings.Contains(err.Error(), "resolves outside the volume") {
		t.Errorf("a container created after the swap: %v, want refused", err)
	}

	// The pod puts a directory back, another one: bound anew, not stacked.
	must(t, os.Remove(filepath.Join(st.ed, "dir")))
	must(t, os.MkdirAll(filepath.Join(st.ed, "dir", "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(st.ed, "dir", "file"), []byte("again"), 0o644))
	before, _ := mountinfo.Under(st.m.podDataDir("uid1"))
	ms, err = st.mounts()
	must(t, err)
	after, _ := mountinfo.Under(st.m.podDataDir("uid1"))
	if len(after) != len(before) {
		t.Errorf("mounts %d before a container's re-creation, %d after: want the binds reused or replaced", len(before), len(after))
	}
	for i, rel := range want {
		if !sameFile(t, ms[i+1].HostPath, filepath.Join(st.ed, rel)) {
			t.Errorf("the bind of %s after the pod remade it is not it", rel)
		}
	}

	st.m.KillPod(context.Background(), st.pod, nil, nil)
	must(t, st.m.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(string) bool { return true })))
	if mounts, _ := mountinfo.Under(st.m.cfg.DataDir); len(mounts) > 0 {
		t.Errorf("mounts left after GC: %v", mounts)
	}
	if _, err := os.Stat(st.m.podDataDir("uid1")); !os.IsNotExist(err) {
		t.Errorf("the pod's data dir after GC: %v, want gone", err)
	}
}

// A hostPath volume's subPath is bound too; GC unmounts the bind before it
// removes the pod's data dir, and leaves the host's files; a mount it does
// not know in the pod's data dir keeps the dir, and what is mounted there.
func TestGCNeverRemovesThroughAMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a subPath is bind-mounted, which needs root; without it a subPath is an error")
	}
	m, _ := newTestManager(t, fakecri.New())
	host := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(host, "data"), 0o755))
	must(t, os.WriteFile(filepath.Join(host, "data", "keep"), []byte("host"), 0o644))
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		VolumeMounts: []corev1.VolumeMount{{Name: "h", MountPath: "/h", SubPath: "data"}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}}}
	if r := syncOnce(t, m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	bind := filepath.Join(m.podDataDir("uid1"), "volume-subpaths", "h", "app", "0")
	if !sameFile(t, bind, filepath.Join(host, "data")) {
		t.Fatalf("the hostPath's subPath is not bound on %s", bind)
	}
	// A mount GC does not know about, in the pod's data dir.
	stray := filepath.Join(m.podDataDir("uid1"), "stray")
	must(t, os.Mkdir(stray, 0o750))
	must(t, unix.Mount(filepath.Join(host, "data"), stray, "", unix.MS_BIND, ""))

	m.KillPod(context.Background(), pod, nil, nil)
	gone := kubecontainer.PodStateFunc(func(string) bool { return true })
	if err := m.GarbageCollect(context.Background(), gone); err == nil || !strings.Contains(err.Error(), "mounts left") {
		t.Errorf("GC with a stray mount: %v, want the data dir kept", err)
	}
	if data, err := os.ReadFile(filepath.Join(host, "data", "keep")); err != nil || string(data) != "host" {
		t.Fatalf("the host's file after GC: %q %v", data, err)
	}
	if _, err := os.Stat(bind); !os.IsNotExist(err) {
		t.Errorf("the subPath bind after GC: %v, want unmounted and removed", err)
	}
	must(t, unix.Unmount(stray, 0))
	must(t, m.GarbageCollect(context.Background(), gone))
	if _, err := os.Stat(m.podDataDir("uid1")); !os.IsNotExist(err) {
		t.Errorf("the pod's data dir after GC: %v, want gone", err)
	}
	if data, err := os.ReadFile(filepath.Join(host, "data", "keep")); err != nil || string(data) != "host" {
		t.Errorf("the host's file after GC: %q %v", data, err)
	}
}

// CVE-2021-25741: the pod swaps its subPath's directory and a symlink to
// the node's root while containers are created. A bind is the directory or
// nothing, never the node's root.
func TestSubPathRacesASwapOfItsDirectory(t *testing.T) {
	st := newSubPathTest(t, corev1.VolumeMount{Name: "ed", MountPath: "/d", SubPath: "d"})
	must(t, os.Mkdir(filepath.Join(st.ed, "d"), 0o755))
	must(t, os.Symlink("/", filepath.Join(st.ed, "l")))
	var root unix.Stat_t
	must(t, unix.Stat("/", &root))
	pathswap.Start(t, filepath.Join(st.ed, "d"), filepath.Join(st.ed, "l"))
	bound, refused := 0, 0
	for n := 0; n < 300 || (bound == 0 || refused == 0) && n < 20000; n++ {
		ms, err := st.mounts()
		if err != nil {
			if !strings.Contains(err.Error(), "resolves outside the volume") {
				t.Errorf("makeMounts: %v, want a bind or the subPath refused", err)
			}
			refused++
			continue
		}
		bound++
		var got unix.Stat_t
		must(t, unix.Stat(ms[0].HostPath, &got))
		if got.Dev == root.Dev && got.Ino == root.Ino {
			t.Fatal("the subPath's bind is the node's root")
		}
	}
	t.Logf("%d bound, %d refused", bound, refused)
}
