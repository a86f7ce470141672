package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
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
	if err := setUpMemoryEmptyDir(dir, size.Value()); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if mounted, _ := isMountPoint(dir); mounted {
		t.Fatal("two tmpfs stacked on the volume")
	}
	if err := setUpMemoryEmptyDir(dir, size.Value()); err != nil {
		t.Fatal(err)
	}

	m.KillPod(context.Background(), pod, nil, nil)
	if err := m.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(string) bool { return true })); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.podDataDir("uid1")); !os.IsNotExist(err) {
		t.Errorf("the pod's data dir after GC: %v, want gone", err)
	}
}

// The size of a Memory emptyDir's tmpfs, as kubelet's: the node's allocatable
// memory, lowered by the pod's memory limit (only when every container has
// one), lowered by the volume's sizeLimit.
func TestMemoryEmptyDirSize(t *testing.T) {
	m, err := New(fakecri.New(), &eventLog{}, Config{NodeName: "n1", DataDir: t.TempDir(),
		NodeAllocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}})
	if err != nil {
		t.Fatal(err)
	}
	limited := func(mem string) corev1.Container {
		c := corev1.Container{Name: "c" + mem, Image: "img:1"}
		if mem != "" {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}
		}
		return c
	}
	sidecar := limited("64Mi")
	sidecar.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
	tests := []struct {
		name       string
		containers []corev1.Container
		init       []corev1.Container
		sizeLimit  string
		want       string
	}{
		{"no limits: the node's allocatable", []corev1.Container{limited("")}, nil, "", "8Gi"},
		{"one container without a limit: no pod limit", []corev1.Container{limited("1Gi"), limited("")}, nil, "", "8Gi"},
		{"the pod's limit: the sum", []corev1.Container{limited("1Gi"), limited("512Mi")}, nil, "", "1536Mi"},
		{"an init container's larger limit", []corev1.Container{limited("256Mi")}, []corev1.Container{limited("2Gi")}, "", "2Gi"},
		{"a sidecar adds up", []corev1.Container{limited("256Mi")}, []corev1.Container{sidecar}, "", "320Mi"},
		{"a smaller sizeLimit", []corev1.Container{limited("1Gi")}, nil, "100Mi", "100Mi"},
		{"a sizeLimit above the pod's limit", []corev1.Container{limited("1Gi")}, nil, "4Gi", "1Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(tt.containers...)
			pod.Spec.InitContainers = tt.init
			d := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
			if tt.sizeLimit != "" {
				d.SizeLimit = ptr(resource.MustParse(tt.sizeLimit))
			}
			if got, want := m.memoryEmptyDirSize(pod, d), resource.MustParse(tt.want); got != want.Value() {
				t.Errorf("size %d, want %s (%d)", got, tt.want, want.Value())
			}
		})
	}
}
