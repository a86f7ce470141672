package reconcile

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// resizePlan is the comparable shape of a plan's resize part: per resource,
// "container current->desired" in order.
type resizePlan struct {
	plan
	Update map[corev1.ResourceName][]string
}

func resizePlanOf(a PodActions) resizePlan {
	p := resizePlan{plan: planOf(a)}
	for name, list := range a.ContainersToUpdate {
		if p.Update == nil {
			p.Update = map[corev1.ResourceName][]string{}
		}
		for _, u := range list {
			p.Update[name] = append(p.Update[name], u.Name)
		}
	}
	return p
}

func resources(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	set := func(l corev1.ResourceList, name corev1.ResourceName, v string) {
		if v != "" {
			l[name] = resource.MustParse(v)
		}
	}
	set(r.Requests, corev1.ResourceCPU, cpuReq)
	set(r.Limits, corev1.ResourceCPU, cpuLim)
	set(r.Requests, corev1.ResourceMemory, memReq)
	set(r.Limits, corev1.ResourceMemory, memLim)
	return r
}

// applied is what a runtime reports for a container created from r (through
// the CRI values kubelet derives from it, read back).
func applied(r corev1.ResourceRequirements) *kubecontainer.ContainerResources {
	m := &Kuberuntime{}
	return appliedResources(m.linuxResources(&corev1.Container{Resources: r}))
}

// TestComputePodActionsForPodResize has kubelet's rows of the same name and
// jetlet's own: each pod starts with three running containers of 100m/200m
// cpu and 100Mi/200Mi memory, applied as the spec says, then the spec (and
// the status) of a row differs.
func TestComputePodActionsForPodResize(t *testing.T) {
	base := resources("100m", "200m", "100Mi", "200Mi")
	withPolicy := func(c *corev1.Container, cpu, memory corev1.ResourceResizeRestartPolicy) {
		c.ResizePolicy = []corev1.ContainerResizePolicy{
			{ResourceName: corev1.ResourceCPU, RestartPolicy: cpu},
			{ResourceName: corev1.ResourceMemory, RestartPolicy: memory},
		}
	}
	tests := []struct {
		name   string
		mutate func(pod *corev1.Pod, status *kubecontainer.PodStatus)
		want   resizePlan
	}{
		{
			name:   "nothing when spec and status resources are equal",
			mutate: func(*corev1.Pod, *kubecontainer.PodStatus) {},
			want:   resizePlan{plan: plan{SandboxID: "sandboxID"}},
		},
		{
			name: "update container cpu and memory resources (increase)",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[1].Resources = resources("150m", "300m", "150Mi", "300Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{
				corev1.ResourceMemory: {"foo2"}, corev1.ResourceCPU: {"foo2"},
			}},
		},
		{
			name: "update container cpu resources only",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[1].Resources = resources("50m", "100m", "100Mi", "200Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{corev1.ResourceCPU: {"foo2"}}},
		},
		{
			name: "update container memory resources only",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[2].Resources = resources("100m", "200m", "100Mi", "400Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{corev1.ResourceMemory: {"foo3"}}},
		},
		{
			name: "a memory request alone is no resize: cgroups hold none",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("100m", "200m", "150Mi", "200Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}},
		},
		{
			name: "nothing when spec and status are equivalent (both at or below the minimum shares and quota)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("1m", "5m", "", "")
				s.ContainerStatuses[0].Resources = applied(resources("2m", "10m", "", ""))
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}},
		},
		{
			name: "update container cpu to an equivalent value: nothing to apply",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("2m", "10m", "", "")
				s.ContainerStatuses[0].Resources = applied(resources("1m", "1m", "", ""))
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}},
		},
		{
			name: "update memory and cpu with RestartContainer for cpu: restart it, whatever the pod's restart policy",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				withPolicy(&p.Spec.Containers[1], corev1.RestartContainer, corev1.NotRequired)
				p.Spec.Containers[1].Resources = resources("150m", "300m", "150Mi", "300Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID", Start: []int{1}, Kill: []string{"foo2/id2/SpecChanged"}}},
		},
		{
			name: "update memory and cpu with RestartContainer for memory: restart it",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				withPolicy(&p.Spec.Containers[2], corev1.NotRequired, corev1.RestartContainer)
				p.Spec.Containers[2].Resources = resources("150m", "300m", "150Mi", "300Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID", Start: []int{2}, Kill: []string{"foo3/id3/SpecChanged"}}},
		},
		{
			name: "update memory with RestartContainer for cpu: in place",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				withPolicy(&p.Spec.Containers[1], corev1.RestartContainer, corev1.NotRequired)
				p.Spec.Containers[1].Resources = resources("100m", "200m", "100Mi", "300Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{corev1.ResourceMemory: {"foo2"}}},
		},
		{
			name: "update cpu with RestartContainer for memory: in place",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				withPolicy(&p.Spec.Containers[1], corev1.NotRequired, corev1.RestartContainer)
				p.Spec.Containers[1].Resources = resources("150m", "300m", "100Mi", "200Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{corev1.ResourceCPU: {"foo2"}}},
		},
		{
			name: "decreases before increases, each in spec order",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("100m", "300m", "100Mi", "300Mi") // up
				p.Spec.Containers[1].Resources = resources("50m", "100m", "100Mi", "150Mi")  // down
				p.Spec.Containers[2].Resources = resources("50m", "200m", "100Mi", "100Mi")  // memory down, cpu request down
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{
				corev1.ResourceMemory: {"foo2", "foo3", "foo1"}, corev1.ResourceCPU: {"foo2", "foo3", "foo1"},
			}},
		},
		{
			name: "a removed limit restarts the container: cgroups would keep it",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("100m", "", "100Mi", "200Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/SpecChanged"}}},
		},
		{
			name: "a runtime that reports no resources: nothing to compare, nothing resized",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("150m", "300m", "150Mi", "300Mi")
				s.ContainerStatuses[0].Resources = nil
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}},
		},
		{
			name: "a container not running is started with the new resources, not resized",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("150m", "300m", "150Mi", "300Mi")
				s.ContainerStatuses[0].State = kubecontainer.ContainerExited
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID", Start: []int{0}}},
		},
		{
			name: "a spec change besides the resources restarts it, no resize",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.Containers[0].Resources = resources("150m", "300m", "150Mi", "300Mi")
				p.Spec.Containers[0].Image = "busybox:1.37"
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/SpecChanged"}}},
		},
		{
			name: "an instance with the whole-container hash of a jetlet before resize, spec unchanged: adopted as it is",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				s.ContainerStatuses[0].Hash = legacyHashContainer(&p.Spec.Containers[0])
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}},
		},
		{
			name: "a running sidecar is resized in place too",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				for i := range p.Spec.InitContainers {
					p.Spec.InitContainers[i].Resources = base
				}
				setSidecar(p, s, "side2", func(cs *kubecontainer.ContainerStatus) { cs.Resources = applied(base) })
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.Resources = applied(base) })
				p.Spec.InitContainers[1].Resources = resources("100m", "200m", "100Mi", "300Mi")
			},
			want: resizePlan{plan: plan{SandboxID: "sandboxID"}, Update: map[corev1.ResourceName][]string{corev1.ResourceMemory: {"side2"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, status := makeBasePodAndStatus()
			for i := range pod.Spec.Containers {
				pod.Spec.Containers[i].Resources = base
				status.ContainerStatuses[i].Resources = applied(base)
			}
			tt.mutate(pod, status)
			got := ComputePodActions(pod, status, Probes{})
			if g := resizePlanOf(got); !reflect.DeepEqual(g, tt.want) {
				t.Errorf("plan\n got %+v\nwant %+v\n(%s)", g, tt.want, got)
			}
		})
	}
}

// TestResizeKeepsTheHash: resources and resizePolicy are out of the hash,
// every other field in it.
func TestResizeKeepsTheHash(t *testing.T) {
	c := corev1.Container{Name: "app", Image: "busybox", Resources: resources("100m", "200m", "100Mi", "200Mi")}
	resized := c
	resized.Resources = resources("1", "2", "1Gi", "2Gi")
	resized.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	if HashContainer(&c) != HashContainer(&resized) {
		t.Error("a change of resources or resizePolicy changed the hash")
	}
	other := c
	other.Image = "busybox:1.37"
	if HashContainer(&c) == HashContainer(&other) {
		t.Error("a change of image kept the hash")
	}
	if legacyHashContainer(&c) == legacyHashContainer(&resized) {
		t.Error("the legacy hash must cover the resources")
	}
}

func TestPodActionsStringShowsResizes(t *testing.T) {
	pod, status := makeBasePodAndStatus()
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources = resources("100m", "200m", "100Mi", "200Mi")
		status.ContainerStatuses[i].Resources = applied(pod.Spec.Containers[i].Resources)
	}
	pod.Spec.Containers[0].Resources = resources("100m", "200m", "100Mi", "256Mi")
	got := ComputePodActions(pod, status, Probes{}).String()
	if want := "Update[memory]=[foo1(id1) memory limit 200Mi, cpu 100m/200m -> memory limit 256Mi, cpu 100m/200m]"; !strings.Contains(got, want) {
		t.Errorf("String() = %s\nwant it to hold %s", got, want)
	}
}

// A memory limit is not lowered to the container's usage or below, as
// kubelet refuses a pod limit below the pod's usage: the update fails with
// ResizeError, the pod says PodResizeInProgress reason Error (and a
// ResizeError event), and once the usage allows it the next sync lowers it
// and clears the error. On the fake runtime, whose usage the test sets.
func TestAMemoryLimitIsNotLoweredBelowUsage(t *testing.T) {
	rt := fakecri.New()
	m, events := newTestManager(t, rt)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Resources: resources("100m", "200m", "64Mi", "256Mi")})
	st := syncedStatus(t, m, pod)
	rt.SetMemoryUsage("app", 100<<20)

	lower := pod.DeepCopy()
	lower.Spec.Containers[0].Resources = resources("100m", "200m", "64Mi", "96Mi")
	res := m.SyncPod(context.Background(), lower, st)
	if !errors.Is(res.Error(), kubecontainer.ErrResize) {
		t.Fatalf("lowering the limit below the usage: %v, want ResizeError", res.Error())
	}
	st = syncedStatusOf(t, m, lower)
	cond, ok := m.resizeInProgress(lower, st, time.Now())
	if !ok || cond.Reason != schemas.ReasonResizeError || !strings.Contains(cond.Message, "not above current memory usage 100Mi") {
		t.Errorf("PodResizeInProgress = %+v, %t; want reason Error saying why", cond, ok)
	}
	if events.count(schemas.EventResizeError) != 1 {
		t.Errorf("%d ResizeError events, want 1", events.count(schemas.EventResizeError))
	}
	if got := st.ContainerStatuses[0].Resources.MemoryLimit.String(); got != "256Mi" {
		t.Errorf("memory limit %s after a refused lowering, want 256Mi", got)
	}

	rt.SetMemoryUsage("app", 50<<20)
	if err := m.SyncPod(context.Background(), lower, st).Error(); err != nil {
		t.Fatalf("lowering the limit above the usage: %v", err)
	}
	st = syncedStatusOf(t, m, lower)
	if got := st.ContainerStatuses[0].Resources.MemoryLimit.String(); got != "96Mi" {
		t.Errorf("memory limit %s, want 96Mi", got)
	}
	if cond, ok := m.resizeInProgress(lower, st, time.Now()); ok {
		t.Errorf("resize still in progress: %+v", cond)
	}
}

// syncedStatusOf reads the pod's status without a sync.
func syncedStatusOf(t *testing.T, m *Kuberuntime, pod *corev1.Pod) *kubecontainer.PodStatus {
	t.Helper()
	st, err := m.GetPodStatus(context.Background(), string(pod.UID), pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
