package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/test/fakecri"
)

// The pod cgroup's values, after kubelet's
// TestResourceConfigForPodWithPodLevelResources and
// TestResourceConfigForPod rows: pod-level limits stand for the
// containers', pod-level requests give the shares, a Burstable pod gets a
// limit only when the pod level or every container sets it.
func TestPodSandboxResources(t *testing.T) {
	list := func(cpu, memory string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if memory != "" {
			l[corev1.ResourceMemory] = resource.MustParse(memory)
		}
		return l
	}
	rr := func(req, lim corev1.ResourceList) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
	tests := []struct {
		name       string
		pod        *corev1.ResourceRequirements
		containers []corev1.ResourceRequirements
		noQuota    bool
		want       *runtimeapi.LinuxContainerResources
	}{
		{name: "best effort", containers: []corev1.ResourceRequirements{{}},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2}},
		{name: "guaranteed containers", containers: []corev1.ResourceRequirements{rr(list("100m", "100Mi"), list("100m", "100Mi")), rr(list("200m", "50Mi"), list("200m", "50Mi"))},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 307, CpuQuota: 30000, CpuPeriod: 100000, MemoryLimitInBytes: 150 << 20}},
		{name: "burstable, one container without limits", containers: []corev1.ResourceRequirements{rr(list("100m", "100Mi"), list("200m", "200Mi")), rr(list("100m", ""), nil)},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 204}},
		{name: "guaranteed pod level, containers without resources", pod: &corev1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")},
			containers: []corev1.ResourceRequirements{{}, {}},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: 1 << 30}},
		{name: "burstable pod level limits over the containers'", pod: &corev1.ResourceRequirements{Requests: list("500m", "256Mi"), Limits: list("2", "1Gi")},
			containers: []corev1.ResourceRequirements{rr(list("100m", "100Mi"), list("1", "512Mi")), {}},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 200000, CpuPeriod: 100000, MemoryLimitInBytes: 1 << 30}},
		{name: "pod level memory limit only", pod: &corev1.ResourceRequirements{Requests: list("", "256Mi"), Limits: list("", "512Mi")},
			containers: []corev1.ResourceRequirements{rr(list("250m", ""), nil)},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 256, MemoryLimitInBytes: 512 << 20}},
		{name: "pod level requests only", pod: &corev1.ResourceRequirements{Requests: list("1", "1Gi")},
			containers: []corev1.ResourceRequirements{{}},
			want:       &runtimeapi.LinuxContainerResources{CpuShares: 1024}},
		{name: "no CFS quota", pod: &corev1.ResourceRequirements{Requests: list("1", "1Gi"), Limits: list("1", "1Gi")},
			containers: []corev1.ResourceRequirements{{}}, noQuota: true,
			want: &runtimeapi.LinuxContainerResources{CpuShares: 1024, MemoryLimitInBytes: 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tt.pod}}
			for i, r := range tt.containers {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Resources: r})
			}
			got := computePodSandboxResources(pod, tt.noQuota)
			if !sameCgroupValues(got, tt.want) || got.CpuPeriod != tt.want.CpuPeriod || got.CpuQuota != tt.want.CpuQuota {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// noPodResize is a runtime without UpdatePodSandboxResources, as
// containerd 1.x.
type noPodResize struct{ *fakecri.Runtime }

func (noPodResize) UpdatePodSandboxResources(context.Context, string, *runtimeapi.LinuxContainerResources) error {
	return fmt.Errorf("UpdatePodSandboxResources: %w", crierr.ErrUnimplemented)
}

// The pod cgroup follows the allocated pod (fakecri records what it was
// given): a pod-level resize is UpdatePodSandboxResources alone, recorded
// and allocated across the sync; a container's resize of a pod without
// pod-level resources changes the pod's sums too, the pod's memory limit
// raised before the container's; a runtime without the call fails nothing.
func TestPodResourcesFollowTheAllocatedPod(t *testing.T) {
	rt := fakecri.New()
	m, _ := newTestManager(t, rt)
	guaranteed := func(cpu, memory string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	}
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Resources: guaranteed("100m", "64Mi")})
	mustSyncOK(t, syncOnce(t, m, pod))
	st, err := m.GetPodStatus(context.Background(), "uid1", pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	sandbox := st.SandboxStatuses[0].GetId()
	if got := rt.PodResources(sandbox); got.GetMemoryLimitInBytes() != 64<<20 || got.GetCpuQuota() != 10000 {
		t.Fatalf("the sandbox's resources at its creation: %v", got)
	}

	pod.Spec.Containers[0].Resources = guaranteed("200m", "128Mi")
	r := syncOnce(t, m, pod)
	mustSyncOK(t, r)
	var order []string
	for _, a := range r.ActionResults() {
		order = append(order, a.Action+" "+a.Message)
	}
	want := []string{
		"UpdatePodSandboxResources pod memory limit 64Mi -> 128Mi",
		"UpdateContainerResources memory limit 64Mi -> 128Mi",
		"UpdatePodSandboxResources pod cpu request/limit 100m/100m -> 200m/200m",
		"UpdateContainerResources cpu request/limit 100m/100m -> 200m/200m",
	}
	if !slices.Equal(order, want) {
		t.Fatalf("actions %q, want %q", order, want)
	}
	if got := rt.PodResources(sandbox); got.GetMemoryLimitInBytes() != 128<<20 || got.GetCpuQuota() != 20000 {
		t.Errorf("the sandbox's resources after the resize: %v", got)
	}
	if r := syncOnce(t, m, pod); len(r.Actions) != 0 {
		t.Errorf("converged, yet: %+v", r.ActionResults())
	}

	m.rt = noPodResize{rt}
	pod.Spec.Containers[0].Resources = guaranteed("200m", "96Mi")
	r = syncOnce(t, m, pod)
	mustSyncOK(t, r)
	if r := syncOnce(t, m, pod); len(r.Actions) != 0 {
		t.Errorf("a runtime without pod resizes: the next sync %+v, want nothing (the values recorded)", r.ActionResults())
	}
}

func mustSyncOK(t *testing.T, r kubecontainer.PodSyncResult) {
	t.Helper()
	if err := r.Error(); err != nil {
		t.Fatalf("sync failed: %v\nactions: %+v", err, r.ActionResults())
	}
}

// What a pod cgroup was given is read from its file once a run, not at
// each sync's plan and status; a write replaces it, garbage collection
// forgets it.
func TestActuatedPodResourcesAreReadOnceARun(t *testing.T) {
	dir := t.TempDir()
	m := &Kuberuntime{cfg: Config{DataDir: dir}, podResources: newPodResourcesCache()}
	res := &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20}
	if err := m.recordPodResources("uid", "sb1", res); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(m.podDataDir("uid"), podResourcesFile)
	// A restarted jetlet reads the record...
	restarted := &Kuberuntime{cfg: m.cfg, podResources: newPodResourcesCache()}
	if got := restarted.actuatedPodResources("uid", "sb1"); got == nil || got.MemoryLimitInBytes != 128<<20 {
		t.Fatalf("after a restart: %v", got)
	}
	// ...once: the file is not read again.
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := restarted.actuatedPodResources("uid", "sb1"); got == nil || got.CpuShares != 512 {
		t.Fatalf("asked again: %v", got)
	}
	if got := restarted.actuatedPodResources("uid", "sb2"); got != nil {
		t.Fatalf("another sandbox's: %v", got)
	}
	// A write is what the next ask gets.
	res.MemoryLimitInBytes = 256 << 20
	if err := restarted.recordPodResources("uid", "sb1", res); err != nil {
		t.Fatal(err)
	}
	if got := restarted.actuatedPodResources("uid", "sb1"); got == nil || got.MemoryLimitInBytes != 256<<20 {
		t.Fatalf("after a write: %v", got)
	}
	// Forgotten (the pod collected), it is read again: gone, nothing.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	restarted.podResources.forget("uid")
	if got := restarted.actuatedPodResources("uid", "sb1"); got != nil {
		t.Fatalf("after the pod was collected: %v", got)
	}
}

// The sandbox resources are kept per pod: a later intent's pod with the
// same resources gets them without their being computed again, one whose
// resources or QoS class changed gets them computed anew, and no caller's
// change to its copy reaches another's.
func TestSandboxResourcesAreComputedAgainOnlyWhenThePodsResourcesChange(t *testing.T) {
	m := &Kuberuntime{podResources: newPodResourcesCache()}
	podWith := func(cpu, memory string) *corev1.Pod {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Resources: corev1.ResourceRequirements{Requests: l, Limits: l}}}}}
	}
	first := m.podSandboxResources(podWith("500m", "128Mi"))
	if first.CpuQuota != 50000 || first.MemoryLimitInBytes != 128<<20 {
		t.Fatalf("first: %v", first)
	}
	first.MemoryLimitInBytes = 1 // the caller's own copy
	if again := m.podSandboxResources(podWith("500m", "128Mi")); again.MemoryLimitInBytes != 128<<20 {
		t.Fatalf("the same resources again: %v", again)
	}
	if resized := m.podSandboxResources(podWith("1", "256Mi")); resized.CpuQuota != 100000 || resized.MemoryLimitInBytes != 256<<20 {
		t.Fatalf("resized: %v", resized)
	}
	// The QoS class a pod's status gives decides too.
	burstable := podWith("1", "256Mi")
	burstable.Status.QOSClass = corev1.PodQOSBestEffort
	if got := m.podSandboxResources(burstable); got.CpuShares != minShares || got.MemoryLimitInBytes != 0 {
		t.Fatalf("with the status's QoS class BestEffort: %v", got)
	}
}
