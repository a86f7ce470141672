package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// fakeObjects is an ObjectSource over maps; a test replaces an object to
// update it (the objects returned are shared, never modified).
type fakeObjects struct {
	mu         sync.Mutex
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

func newFakeObjects() *fakeObjects {
	return &fakeObjects{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
}

func (f *fakeObjects) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, fmt.Errorf("configmap %s/%s %w", ns, name, kubecontainer.ErrObjectNotFound)
}

func (f *fakeObjects) Secret(ns, name string) (*corev1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("secret %s/%s %w", ns, name, kubecontainer.ErrObjectNotFound)
}

func (f *fakeObjects) putConfigMap(name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps["ns/"+name] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
}

func (f *fakeObjects) putSecret(name string, typ corev1.SecretType, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: typ, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	f.secrets["ns/"+name] = s
}

// configRuntime is the fake CRI keeping each container's config, for its
// env and mounts.
type configRuntime struct {
	*fakecri.Runtime
	mu      sync.Mutex
	configs map[string]*runtimeapi.ContainerConfig // by container name, the latest
}

func (r *configRuntime) CreateContainer(ctx context.Context, sandboxID string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.configs[c.Metadata.Name] = c
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sandboxID, c, sc)
}

func (r *configRuntime) config(t *testing.T, name string) *runtimeapi.ContainerConfig {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.configs[name]
	if c == nil {
		t.Fatalf("container %q was never created", name)
	}
	return c
}

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

type configTest struct {
	m      *Kuberuntime
	rt     *configRuntime
	events *eventLog
	objs   *fakeObjects
	clock  *fixedClock
}

func newConfigTest(t *testing.T) *configTest {
	t.Helper()
	ct := &configTest{rt: &configRuntime{Runtime: fakecri.New(), configs: map[string]*runtimeapi.ContainerConfig{}},
		events: &eventLog{}, objs: newFakeObjects(), clock: &fixedClock{t: time.Now()}}
	m, err := New(ct.rt, ct.events, Config{NodeName: "n1", DataDir: t.TempDir(), Objects: ct.objs, Clock: ct.clock,
		NodeAllocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("2")}})
	if err != nil {
		t.Fatal(err)
	}
	ct.m = m
	// Unmount what the test's secret volumes mounted, whatever it ends with.
	t.Cleanup(func() { _ = m.tearDownVolumes("uid1") })
	return ct
}

func (ct *configTest) status(t *testing.T, pod *corev1.Pod) *schemas.PodStatus {
	t.Helper()
	st, err := ct.m.GetPodStatus(context.Background(), string(pod.UID), pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return ct.m.ToAPIStatus(pod, st)
}

func volumeOf(name string, src corev1.VolumeSource) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: src}
}

func ptrMode(m int32) *int32 { return &m }

// A pod using every volume of API data: the files, modes, items and links as
// kubelet writes them, mounted read-only; the secret volume on a tmpfs.
func TestAPIDataVolumesAreWrittenBeforeTheContainers(t *testing.T) {
	ct := newConfigTest(t)
	ct.objs.putConfigMap("app", map[string]string{"app.conf": "port=80", "other": "x"})
	ct.objs.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"password": "hunter2", "user": "admin"})
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "cfg", MountPath: "/etc/app"}, {Name: "sec", MountPath: "/etc/db"},
			{Name: "info", MountPath: "/etc/info"}, {Name: "all", MountPath: "/etc/all"},
			{Name: "cfg", MountPath: "/app.conf", SubPath: "conf/app.conf"},
		}})
	pod.Labels = map[string]string{"tier": "web", "app": "shop"}
	pod.Annotations = map[string]string{"note": `say "hi"`}
	pod.Spec.Volumes = []corev1.Volume{
		volumeOf("cfg", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, DefaultMode: ptrMode(0o444),
			Items: []corev1.KeyToPath{{Key: "app.conf", Path: "conf/app.conf", Mode: ptrMode(0o600)}, {Key: "other", Path: "other"}}}}),
		volumeOf("sec", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db", DefaultMode: ptrMode(0o400)}}),
		volumeOf("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
			{Path: "tier", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}},
			{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
			{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		}}}),
		volumeOf("all", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrMode(0o440), Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: []corev1.KeyToPath{{Key: "app.conf", Path: "app.conf"}}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Items: []corev1.KeyToPath{{Key: "user", Path: "db/user", Mode: ptrMode(0o404)}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "uid", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}}},
		}}}),
	}
	if r := syncOnce(t, ct.m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	vol := func(plugin, name string) string { return ct.m.apiDataVolumePath("uid1", plugin, name) }
	files := []struct {
		path, content string
		mode          os.FileMode
	}{
		{filepath.Join(vol(configMapPluginDir, "cfg"), "conf/app.conf"), "port=80", 0o600},
		{filepath.Join(vol(configMapPluginDir, "cfg"), "other"), "x", 0o444},
		{filepath.Join(vol(secretPluginDir, "sec"), "password"), "hunter2", 0o400},
		{filepath.Join(vol(secretPluginDir, "sec"), "user"), "admin", 0o400},
		{filepath.Join(vol(downwardAPIPluginDir, "info"), "name"), "p", 0o644},
		{filepath.Join(vol(downwardAPIPluginDir, "info"), "labels"), "app=\"shop\"\ntier=\"web\"", 0o644},
		{filepath.Join(vol(downwardAPIPluginDir, "info"), "annotations"), `note="say \"hi\""`, 0o644},
		{filepath.Join(vol(downwardAPIPluginDir, "info"), "tier"), "web", 0o644},
		{filepath.Join(vol(downwardAPIPluginDir, "info"), "mem"), "64", 0o644},
		{filepath.Join(vol(downwardAPIPluginDir, "info"), "cpu"), "2000", 0o644}, // no limit: the node's allocatable
		{filepath.Join(vol(projectedPluginDir, "all"), "app.conf"), "port=80", 0o440},
		{filepath.Join(vol(projectedPluginDir, "all"), "db/user"), "admin", 0o404},
		{filepath.Join(vol(projectedPluginDir, "all"), "uid"), "uid1", 0o440},
	}
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Error(err)
			continue
		}
		if string(b) != f.content {
			t.Errorf("%s = %q, want %q", f.path, b, f.content)
		}
		if fi, _ := os.Stat(f.path); fi.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, fi.Mode().Perm(), f.mode)
		}
	}
	if _, err := os.Lstat(filepath.Join(vol(configMapPluginDir, "cfg"), "app.conf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key not in items was written: %v", err)
	}
	if target, _ := os.Readlink(filepath.Join(vol(configMapPluginDir, "cfg"), "conf")); target != "..data/conf" {
		t.Errorf("conf -> %q, want ..data/conf", target)
	}

	want := map[string]string{
		"/etc/app": vol(configMapPluginDir, "cfg"), "/etc/db": vol(secretPluginDir, "sec"),
		"/etc/info": vol(downwardAPIPluginDir, "info"), "/etc/all": vol(projectedPluginDir, "all"),
		// A subPath: its bind (volume_subpaths.go), of the generation's
		// file, through the volume's symlinks.
		"/app.conf": filepath.Join(ct.m.podDataDir("uid1"), "volume-subpaths", "cfg", "app", "4"),
	}
	if !sameFile(t, want["/app.conf"], filepath.Join(vol(configMapPluginDir, "cfg"), "conf/app.conf")) {
		t.Errorf("the subPath's bind is not the volume's conf/app.conf")
	}
	for _, mnt := range ct.rt.config(t, "app").Mounts {
		if mnt.ContainerPath == etcHostsPath {
			continue // the pod's hosts file (etc_hosts_test.go)
		}
		if mnt.HostPath != want[mnt.ContainerPath] || !mnt.Readonly {
			t.Errorf("mount %s <- %s (read-only %v), want %s read-only", mnt.ContainerPath, mnt.HostPath, mnt.Readonly, want[mnt.ContainerPath])
		}
	}

	// Secret, downwardAPI and projected volumes live in memory; ConfigMaps
	// on disk.
	if os.Geteuid() != 0 {
		t.Log("not root: the secret volumes' tmpfs is not checked (mounting one needs root)")
		return
	}
	for dir, tmpfs := range map[string]bool{vol(secretPluginDir, "sec"): true, vol(projectedPluginDir, "all"): true, vol(downwardAPIPluginDir, "info"): true, vol(configMapPluginDir, "cfg"): false} {
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			t.Fatal(err)
		}
		if got := fs.Type == unix.TMPFS_MAGIC; got != tmpfs {
			t.Errorf("%s on a tmpfs: %v, want %v", dir, got, tmpfs)
		}
	}
}

// Secret, downwardAPI and projected volumes are a tmpfs (the pod's memory
// limit its size), as kubelet's plugins wrap a Memory emptyDir for them, a
// projected one of ConfigMaps and the downward API too; garbage collection unmounts
// them (no mount is left under the pod's directory); never on disk. Without
// root jetlet cannot mount them, and the volume fails rather than falling
// back to disk.
func TestInMemoryVolumesAreTmpfsUnmountedByGC(t *testing.T) {
	for _, tc := range []struct {
		name, plugin, file string
		source             corev1.VolumeSource
	}{
		{"secret", secretPluginDir, "password", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
		{"downwardAPI", downwardAPIPluginDir, "name", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		{"projected without a secret", projectedPluginDir, "app.conf", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := newConfigTest(t)
			ct.objs.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"password": "hunter2"})
			ct.objs.putConfigMap("app", map[string]string{"app.conf": "port=80"})
			pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "vol", MountPath: "/etc/vol"}}})
			pod.Spec.Volumes = []corev1.Volume{volumeOf("vol", tc.source)}
			dir := ct.m.apiDataVolumePath("uid1", tc.plugin, "vol")
			r := syncOnce(t, ct.m, pod)
			if os.Geteuid() != 0 {
				if r.Error() == nil || !strings.Contains(r.Error().Error(), "unmounted volumes=[vol]") {
					t.Fatalf("not root: sync %v, want the volume unmounted", r.Error())
				}
				if _, err := os.Stat(filepath.Join(dir, tc.file)); err == nil {
					t.Fatal("not root: the volume was written to disk")
				}
				return
			}
			if r.Error() != nil {
				t.Fatal(r.Error())
			}
			var fs unix.Statfs_t
			if err := unix.Statfs(dir, &fs); err != nil {
				t.Fatal(err)
			}
			if fs.Type != unix.TMPFS_MAGIC || int64(fs.Blocks)*fs.Bsize != 8<<20 {
				t.Fatalf("%s: type %#x, %d bytes; want a tmpfs of the pod's 8Mi limit", dir, fs.Type, int64(fs.Blocks)*fs.Bsize)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.file)); err != nil {
				t.Fatalf("the volume's file: %v", err)
			}
			ct.m.KillPod(context.Background(), pod, nil, nil)
			ct.clock.t = time.Now() // the dead are at least 0 s old
			if err := ct.m.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(string) bool { return true })); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(ct.m.podDataDir("uid1")); !os.IsNotExist(err) {
				t.Errorf("the pod's data dir after GC: %v, want gone", err)
			}
			mounts, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(mounts), ct.m.podDataDir("uid1")) {
				t.Errorf("a mount is left under %s after GC", ct.m.podDataDir("uid1"))
			}
		})
	}
}

// A volume whose ConfigMap is missing holds the pod back, as kubelet: no
// sandbox, the containers waiting in ContainerCreating, a FailedMount event
// naming the volume and the object; the sync after the ConfigMap is put
// starts the pod, with no new spec. An optional one that is missing is an
// empty volume.
func TestVolumeWaitsForItsConfigMap(t *testing.T) {
	ct := newConfigTest(t)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}, {Name: "maybe", MountPath: "/etc/maybe"}}})
	optional := true
	pod.Spec.Volumes = []corev1.Volume{
		volumeOf("cfg", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}),
		volumeOf("maybe", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &optional}}),
	}
	for range 2 { // each sync tries again
		r := syncOnce(t, ct.m, pod)
		if r.Error() == nil || !strings.Contains(r.Error().Error(), "unmounted volumes=[cfg]") {
			t.Fatalf("sync: %v, want the volume cfg unmounted", r.Error())
		}
		if len(r.Actions) != 0 {
			t.Fatalf("actions %v taken before the volume was mounted", r.ActionResults())
		}
	}
	if sbs, _ := ct.rt.ListPodSandbox(context.Background(), nil); len(sbs) != 0 {
		t.Fatalf("%d sandboxes created for a pod waiting for its volume", len(sbs))
	}
	st := ct.status(t, pod)
	if c := st.Containers[0]; c.State != schemas.ContainerWaiting || c.Reason != "ContainerCreating" {
		t.Errorf("container %s %s, want Waiting ContainerCreating", c.State, c.Reason)
	}
	failed := ct.events.of(schemas.EventFailedMount)
	if len(failed) != 2 {
		t.Fatalf("%d FailedMount events, want one per sync", len(failed))
	}
	if msg := failed[0].Message; msg != `MountVolume.SetUp failed for volume "cfg" : configmap ns/app not found` {
		t.Errorf("FailedMount message %q", msg)
	}

	ct.objs.putConfigMap("app", map[string]string{"k": "v"})
	if r := syncOnce(t, ct.m, pod); r.Error() != nil {
		t.Fatalf("sync once the ConfigMap is there: %v", r.Error())
	}
	if st := ct.status(t, pod); st.Containers[0].State != schemas.ContainerRunning {
		t.Fatalf("container %s after the ConfigMap was put", st.Containers[0].State)
	}
	maybe := ct.m.apiDataVolumePath("uid1", configMapPluginDir, "maybe")
	if got := entries(t, maybe); len(got) != 2 { // ..data and its empty generation
		t.Errorf("the optional volume holds %v, want nothing but ..data and a generation", got)
	}
}

// A missing key is a FailedMount naming it; an item of an optional source
// whose key is missing is left out.
func TestVolumeItemsWithMissingKeys(t *testing.T) {
	ct := newConfigTest(t)
	ct.objs.putSecret("db", corev1.SecretTypeOpaque, map[string]string{"user": "admin"})
	optional := true
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	pod.Spec.Volumes = []corev1.Volume{
		volumeOf("opt", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Optional: &optional,
				Items: []corev1.KeyToPath{{Key: "user", Path: "user"}, {Key: "token", Path: "token"}}}}}}}),
		volumeOf("req", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db",
			Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}}),
	}
	r := syncOnce(t, ct.m, pod)
	if r.Error() == nil || !strings.Contains(r.Error().Error(), "unmounted volumes=[req]") {
		t.Fatalf("sync: %v, want req unmounted", r.Error())
	}
	if msg := ct.events.of(schemas.EventFailedMount)[0].Message; msg != `MountVolume.SetUp failed for volume "req" : couldn't find key token in Secret ns/db` {
		t.Errorf("FailedMount message %q", msg)
	}
	opt := ct.m.apiDataVolumePath("uid1", projectedPluginDir, "opt")
	if _, err := os.Stat(filepath.Join(opt, "user")); err != nil {
		t.Errorf("optional source's present key: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(opt, "token")); !os.IsNotExist(err) {
		t.Errorf("optional source's missing key: %v, want absent", err)
	}
}

// A running pod's volumes follow their objects: each sync rewrites what
// changed (a new generation, the old one removed), nothing when nothing
// did; a volume whose object then disappears keeps its content, with a
// FailedMount, and the pod runs on. A subPath mount and env keep the values
// the container started with.
func TestVolumesFollowTheirObjectsWhileThePodRuns(t *testing.T) {
	ct := newConfigTest(t)
	ct.objs.putConfigMap("app", map[string]string{"conf": "v1"})
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		Env:          []corev1.EnvVar{{Name: "CONF", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "conf"}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}}})
	pod.Spec.Volumes = []corev1.Volume{volumeOf("cfg", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}})}
	if r := syncOnce(t, ct.m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	dir := ct.m.apiDataVolumePath("uid1", configMapPluginDir, "cfg")
	gen1 := generations(t, dir)

	ct.clock.t = ct.clock.t.Add(time.Minute)
	if r := syncOnce(t, ct.m, pod); r.Error() != nil {
		t.Fatal(r.Error())
	}
	if got := generations(t, dir); got[0] != gen1[0] {
		t.Fatalf("a sync with nothing changed rewrote the volume: %v, was %v", got, gen1)
	}

	ct.objs.putConfigMap("app", map[string]string{"conf": "v2"})
	r := syncOnce(t, ct.m, pod)
	if r.Error() != nil {
		t.Fatal(r.Error())
	}
	if len(r.Actions) != 0 {
		t.Errorf("an update of the volume took actions: %v", r.ActionResults())
	}
	if got := readVolumeFile(t, dir, "conf"); got != "v2" {
		t.Fatalf("conf = %q after the update", got)
	}
	if current, _ := os.Readlink(filepath.Join(dir, dataDirName)); current == gen1[0] || len(generations(t, dir)) != 2 {
		t.Fatalf("generations %v after the update (first %v, ..data %s): want a new one beside the first", generations(t, dir), gen1, current)
	}
	if env := ct.rt.config(t, "app").Envs; len(env) != 1 || string(env[0].Value) != "v1" {
		t.Errorf("env %v: want the value the container started with", env)
	}

	delete(ct.objs.configMaps, "ns/app")
	if r := syncOnce(t, ct.m, pod); r.Error() != nil {
		t.Fatalf("a volume that was mounted held the running pod back: %v", r.Error())
	}
	if got := readVolumeFile(t, dir, "conf"); got != "v2" {
		t.Errorf("conf = %q after its ConfigMap went, want the last content", got)
	}
	if n := ct.events.count(schemas.EventFailedMount); n != 1 {
		t.Errorf("%d FailedMount events, want 1", n)
	}
}

// Without an ObjectSource nothing that needs one is written, saying why;
// the downward API needs none.
func TestNoObjectSource(t *testing.T) {
	m, events := newTestManager(t, fakecri.New())
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	pod.Spec.Volumes = []corev1.Volume{
		volumeOf("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}),
	}
	if r := syncOnce(t, m, pod); r.Error() != nil {
		t.Fatalf("downwardAPI without an object source: %v", r.Error())
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, volumeOf("cfg", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}))
	if r := syncOnce(t, m, pod); r.Error() == nil {
		t.Fatal("a configMap volume without an object source was mounted")
	}
	if evs := events.of(schemas.EventFailedMount); len(evs) != 1 || !strings.Contains(evs[0].Message, errNoObjectSource.Error()) {
		t.Errorf("FailedMount events %v", evs)
	}
}

// ReferencedObjects names every ConfigMap and Secret a pod refers to, once.
func TestReferencedObjects(t *testing.T) {
	pod := testPod(corev1.Container{Name: "app", Image: "img:1",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: cmRef("env")}}},
		Env:     []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: cmRef("db"), Key: "k"}}}}})
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "img:1",
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: cmRef("init")}}}}}
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	pod.Spec.Volumes = []corev1.Volume{
		volumeOf("a", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cmRef("env")}}),
		volumeOf("b", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}),
		volumeOf("c", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: cmRef("proj")}}, {Secret: &corev1.SecretProjection{LocalObjectReference: cmRef("psec")}}}}}),
		volumeOf("d", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
	}
	var got []string
	for _, r := range ReferencedObjects(pod) {
		got = append(got, r.String())
	}
	want := "configmap ns/env,configmap ns/proj,secret ns/db,secret ns/init,secret ns/psec,secret ns/pull"
	if strings.Join(got, ",") != want {
		t.Errorf("ReferencedObjects = %v, want %s", got, want)
	}
}
