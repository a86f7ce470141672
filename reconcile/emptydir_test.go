package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/test/fakecri"
)

// An emptyDir of medium Memory is a tmpfs of its sizeLimit, mounted by jetlet
// before the container is created and unmounted when garbage collection
// removes the pod's volumes. Mounting needs root: without it the test skips
// (cmd/jetlet then has the validator reject medium Memory).
func TestMemoryEmptyDirIsATmpfsUnmountedByGC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; without it jetlet rejects emptyDir medium Memory (schemas.IntentTarget.NoMemoryEmptyDir)")
	}
	rt := fakecri.New()
	m, _ := newTestManager(t, rt)
	size := resource.MustParse("1Mi")
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		VolumeMounts: []corev1.VolumeMount{{Name: "ram", MountPath: "/ram"}, {Name: "ram", MountPath: "/sub", SubPath: "a/b"}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: "ram", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}}
	dir := m.emptyDirPath("uid1", "ram")
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })

	if r := syncOnce(t, m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		t.Fatalf("%s is on a file system of type %#x, want tmpfs", dir, fs.Type)
	}
	if got := int64(fs.Blocks) * fs.Bsize; got != size.Value() {
		t.Errorf("tmpfs size %d, want the sizeLimit %d", got, size.Value())
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "b")); err != nil || !fi.IsDir() {
		t.Errorf("subPath a/b inside the tmpfs: %v", err)
	}
	// A second sync (a restarted container, a restarted jetlet) mounts nothing more.
	if err := setUpMemoryEmptyDir(dir, pod.Spec.Volumes[0].EmptyDir); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if mounted, _ := isMountPoint(dir); mounted {
		t.Fatal("two tmpfs stacked on the volume")
	}
	if err := setUpMemoryEmptyDir(dir, pod.Spec.Volumes[0].EmptyDir); err != nil {
		t.Fatal(err)
	}

	m.KillPod(context.Background(), pod, nil, nil)
	if err := m.GarbageCollect(context.Background(), PodStateFunc(func(string) bool { return true })); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.podDataDir("uid1")); !os.IsNotExist(err) {
		t.Errorf("the pod's data dir after GC: %v, want gone", err)
	}
}
