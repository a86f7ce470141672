package reconcile

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// makeBasePodAndStatus: a pod of three running containers in one ready
// sandbox, converged (kubelet's TestComputePodActions style).
func makeBasePodAndStatus() (*corev1.Pod, *kubecontainer.PodStatus) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "12345678", Name: "foo", Namespace: "new"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{
				{Name: "foo1", Image: "busybox", Command: []string{"sleep", "1000"}},
				{Name: "foo2", Image: "busybox", Command: []string{"sleep", "1000"}},
				{Name: "foo3", Image: "busybox", Command: []string{"sleep", "1000"}},
			},
		},
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	status := &kubecontainer.PodStatus{
		UID: "12345678", Name: "foo", Namespace: "new",
		IPs: []string{"10.0.0.1"},
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{
			Id:       "sandboxID",
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "foo", Namespace: "new", Uid: "12345678", Attempt: 0},
			State:    runtimeapi.PodSandboxState_SANDBOX_READY,
			Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.1"},
			Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
				Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD},
			}},
		}},
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		status.ContainerStatuses = append(status.ContainerStatuses, &kubecontainer.ContainerStatus{
			ID: fmt.Sprintf("id%d", i+1), Name: c.Name, SandboxID: "sandboxID",
			State: kubecontainer.ContainerRunning, Hash: HashContainer(c), CreatedAt: t0, StartedAt: t0,
		})
	}
	return pod, status
}

func addInitContainers(pod *corev1.Pod) {
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "init1", Image: "busybox", Command: []string{"true"}},
		{Name: "init2", Image: "busybox", Command: []string{"true"}},
	}
}

// initStatus returns the status of a pod with init containers, none of whose
// app containers has been created.
func setInitStatuses(pod *corev1.Pod, status *kubecontainer.PodStatus, states map[string]*kubecontainer.ContainerStatus) {
	status.ContainerStatuses = nil
	for _, name := range []string{"init2", "init1"} {
		if cs, ok := states[name]; ok {
			cs.Name, cs.ID, cs.Init = name, name+"-id", true
			for i := range pod.Spec.InitContainers {
				if pod.Spec.InitContainers[i].Name == name {
					cs.Hash = HashContainer(&pod.Spec.InitContainers[i])
				}
			}
			status.ContainerStatuses = append(status.ContainerStatuses, cs)
		}
	}
}

// addSidecars makes the pod's init containers two sidecars (restartPolicy
// Always); the app containers keep running.
func addSidecars(pod *corev1.Pod) {
	always := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "side1", Image: "busybox", Command: []string{"sleep", "1000"}, RestartPolicy: &always},
		{Name: "side2", Image: "busybox", Command: []string{"sleep", "1000"}, RestartPolicy: &always},
	}
}

// setSidecar puts an instance of the named init container in the status,
// newest of all, running and matching its spec unless mutate says otherwise.
func setSidecar(pod *corev1.Pod, status *kubecontainer.PodStatus, name string, mutate func(*kubecontainer.ContainerStatus)) {
	cs := &kubecontainer.ContainerStatus{ID: name + "-id", Name: name, SandboxID: "sandboxID", State: kubecontainer.ContainerRunning, Init: true}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			cs.Hash = HashContainer(&pod.Spec.InitContainers[i])
		}
	}
	if mutate != nil {
		mutate(cs)
	}
	status.ContainerStatuses = append([]*kubecontainer.ContainerStatus{cs}, status.ContainerStatuses...)
}

type fakeProbes map[string]kubecontainer.ProbeResult

func (f fakeProbes) Get(id string) (kubecontainer.ProbeResult, bool) { r, ok := f[id]; return r, ok }

// plan is the comparable shape of PodActions.
type plan struct {
	KillPod, CreateSandbox bool
	SandboxID              string
	Attempt                uint32
	Init                   []int
	Start                  []int
	Kill                   []string // name/id/reason
}

func planOf(a PodActions) plan {
	p := plan{KillPod: a.KillPod, CreateSandbox: a.CreateSandbox, SandboxID: a.SandboxID, Attempt: a.Attempt, Init: a.InitContainersToStart, Start: a.ContainersToStart}
	for _, k := range a.ContainersToKill {
		p.Kill = append(p.Kill, k.Name+"/"+k.ID+"/"+k.Reason)
	}
	return p
}

func TestComputePodActions(t *testing.T) {
	exited := func(code int32) func(*kubecontainer.ContainerStatus) {
		return func(cs *kubecontainer.ContainerStatus) { cs.State, cs.ExitCode = kubecontainer.ContainerExited, code }
	}
	setState := func(s kubecontainer.ContainerState) func(*kubecontainer.ContainerStatus) {
		return func(cs *kubecontainer.ContainerStatus) { cs.State = s }
	}
	onContainer := func(status *kubecontainer.PodStatus, i int, f func(*kubecontainer.ContainerStatus)) {
		f(status.ContainerStatuses[i])
	}
	allExited := func(status *kubecontainer.PodStatus, code int32) {
		for _, cs := range status.ContainerStatuses {
			cs.State, cs.ExitCode = kubecontainer.ContainerExited, code
		}
	}

	tests := []struct {
		name   string
		mutate func(pod *corev1.Pod, status *kubecontainer.PodStatus)
		probes Probes
		want   plan
	}{
		{
			name: "converged pod: nothing to do",
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name:   "no sandbox: create one (attempt 0) and start every container",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) { s.SandboxStatuses = nil; s.ContainerStatuses = nil },
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0, 1, 2}},
		},
		{
			name: "sandbox not ready: kill the pod, new sandbox attempt 1, start all",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name: "several ready sandboxes: reconcile into a new one",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
				s.SandboxStatuses = append(s.SandboxStatuses, &runtimeapi.PodSandboxStatus{
					Id: "older", State: runtimeapi.PodSandboxState_SANDBOX_READY,
					Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2"}, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 0},
				})
				s.SandboxStatuses[0].Metadata.Attempt = 3
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 4, Start: []int{0, 1, 2}},
		},
		{
			name:   "network namespace changed (now hostNetwork): new sandbox, old id not reused",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.HostNetwork = true },
			want:   plan{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name: "network namespace changed (no longer hostNetwork)",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
				s.SandboxStatuses[0].Linux.Namespaces.Options.Network = runtimeapi.NamespaceMode_NODE
			},
			want: plan{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name:   "user namespace changed (now hostUsers false): new sandbox, old id not reused",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.HostUsers = ptr(false) },
			want:   plan{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name: "user namespace changed (no longer hostUsers false)",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
				s.SandboxStatuses[0].Linux.Namespaces.Options.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}
			},
			want: plan{KillPod: true, CreateSandbox: true, Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name: "hostUsers false in its user namespace: fine",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.HostUsers = ptr(false)
				s.SandboxStatuses[0].Linux.Namespaces.Options.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name:   "sandbox without IP for a pod network pod: new sandbox",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) { s.SandboxStatuses[0].Network.Ip = "" },
			want:   plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name: "sandbox without IP while the runtime's pod network is down: kept (only lo)",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
				s.SandboxStatuses[0].Network.Ip = ""
				s.NetworkDown = true
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "host network pod without IP: fine",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.HostNetwork = true
				s.SandboxStatuses[0].Linux.Namespaces.Options.Network = runtimeapi.NamespaceMode_NODE
				s.SandboxStatuses[0].Network.Ip = ""
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "Never, sandbox dead after containers ran: done, no new sandbox",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				allExited(s, 0)
			},
			want: plan{KillPod: true, SandboxID: "sandboxID", Attempt: 1},
		},
		{
			name: "Never, sandbox dead and no container ever created: retry the sandbox",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.ContainerStatuses = nil
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Start: []int{0, 1, 2}},
		},
		{
			name: "OnFailure, sandbox dead, every container succeeded: no new sandbox",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				allExited(s, 0)
			},
			want: plan{KillPod: true, SandboxID: "sandboxID", Attempt: 1},
		},
		{
			name: "OnFailure, sandbox dead, one container failed: new sandbox, start only that one",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				allExited(s, 0)
				s.ContainerStatuses[1].ExitCode = 2
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Start: []int{1}},
		},
		{
			name:   "Always, container exited 0: restart it",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) { onContainer(s, 0, exited(0)) },
			want:   plan{SandboxID: "sandboxID", Start: []int{0}},
		},
		{
			name:   "Always, container exited 1: restart it",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) { onContainer(s, 1, exited(1)) },
			want:   plan{SandboxID: "sandboxID", Start: []int{1}},
		},
		{
			name: "empty restart policy acts as Always",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = ""
				onContainer(s, 2, exited(0))
			},
			want: plan{SandboxID: "sandboxID", Start: []int{2}},
		},
		{
			name: "OnFailure, container exited 0: not restarted",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				onContainer(s, 0, exited(0))
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "OnFailure, container exited 1: restarted",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				onContainer(s, 0, exited(1))
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0}},
		},
		{
			name: "Never, container exited 1: not restarted",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				onContainer(s, 0, exited(1))
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "Never, every container exited: kill the pod (stop the sandbox)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				allExited(s, 0)
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "OnFailure, every container succeeded: kill the pod",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				allExited(s, 0)
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "container in unknown state: kill it, then start it",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
				onContainer(s, 1, setState(kubecontainer.ContainerUnknown))
			},
			want: plan{SandboxID: "sandboxID", Start: []int{1}, Kill: []string{"foo2/id2/Unknown"}},
		},
		{
			name: "container created but not started: start a new one, even under Never",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				onContainer(s, 2, setState(kubecontainer.ContainerCreated))
			},
			want: plan{SandboxID: "sandboxID", Start: []int{2}},
		},
		{
			name:   "container never created: start it",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[:2] },
			want:   plan{SandboxID: "sandboxID", Start: []int{2}},
		},
		{
			name:   "spec changed: kill and restart only that container",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.Containers[1].Image = "busybox:2" },
			want:   plan{SandboxID: "sandboxID", Start: []int{1}, Kill: []string{"foo2/id2/SpecChanged"}},
		},
		{
			name: "spec changed under Never: restarted all the same",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/SpecChanged"}},
		},
		{
			name:   "liveness probe failed under Always: kill and restart",
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name:   "liveness probe failed under Never: kill, no restart, pod lives on",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.RestartPolicy = corev1.RestartPolicyNever },
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name:   "liveness probe success: kept",
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeSuccess}},
			want:   plan{SandboxID: "sandboxID"},
		},
		{
			name:   "startup probe failed: kill and restart",
			probes: Probes{Startup: fakeProbes{"id3": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{2}, Kill: []string{"foo3/id3/StartupProbe"}},
		},
		{
			name:   "liveness probe failed under OnFailure: kill and restart",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			probes: Probes{Liveness: fakeProbes{"id2": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{1}, Kill: []string{"foo2/id2/LivenessProbe"}},
		},
		{
			name:   "liveness probe not yet answered (unknown): kept",
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeUnknown}, Startup: fakeProbes{"id1": kubecontainer.ProbeUnknown}},
			want:   plan{SandboxID: "sandboxID"},
		},
		{
			name:   "startup probe failed under Never: kill, no restart",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.RestartPolicy = corev1.RestartPolicyNever },
			probes: Probes{Startup: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Kill: []string{"foo1/id1/StartupProbe"}},
		},
		{
			name:   "startup probe passed, liveness failed: the liveness failure kills",
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}, Startup: fakeProbes{"id1": kubecontainer.ProbeSuccess}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name:   "liveness and startup both failed: one kill, reason LivenessProbe",
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}, Startup: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name:   "spec changed and liveness failed: the spec change is the reason",
			mutate: func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.Containers[0].Image = "busybox:2" },
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/SpecChanged"}},
		},
		{
			name:   "liveness failure of an instance that already exited: the restart policy alone decides",
			mutate: func(_ *corev1.Pod, s *kubecontainer.PodStatus) { onContainer(s, 0, exited(137)) },
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0}},
		},
		{
			name:   "liveness failures of two containers: both killed and restarted",
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure, "id3": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0, 2}, Kill: []string{"foo1/id1/LivenessProbe", "foo3/id3/LivenessProbe"}},
		},
		{
			name: "single container under Never, liveness failed: kill it and the pod",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers = p.Spec.Containers[:1]
				s.ContainerStatuses = s.ContainerStatuses[:1]
			},
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{KillPod: true, SandboxID: "sandboxID", Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name: "pod being deleted: exited containers are not restarted",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				now := metav1.Now()
				p.DeletionTimestamp = &now
				allExited(s, 1)
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "init containers, new pod: sandbox and the first init container only",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				s.SandboxStatuses, s.ContainerStatuses = nil, nil
			},
			want: plan{KillPod: true, CreateSandbox: true, Init: []int{0}},
		},
		{
			name: "init containers, sandbox ready, none ran: first init container",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				setInitStatuses(p, s, nil)
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}},
		},
		{
			name: "init container running: wait",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerRunning}})
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "first init container succeeded: the second is next",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited}})
			},
			want: plan{SandboxID: "sandboxID", Init: []int{1}},
		},
		{
			name: "every init container succeeded: start the app containers",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited}, "init2": {State: kubecontainer.ContainerExited}})
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0, 1, 2}},
		},
		{
			name: "init container failed under Always: run it again",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited}, "init2": {State: kubecontainer.ContainerExited, ExitCode: 1}})
			},
			want: plan{SandboxID: "sandboxID", Init: []int{1}},
		},
		{
			name: "init container failed under OnFailure: run it again",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited, ExitCode: 3}})
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}},
		},
		{
			name: "init container failed under Never: kill the pod",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited, ExitCode: 3}})
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "init container OOM-killed with exit 0 counts as failed",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited, Reason: "OOMKilled"}})
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "init container unknown under Always: kill it, then run it again",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerUnknown}})
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}, Kill: []string{"init1/init1-id/Unknown"}},
		},
		{
			name: "init container unknown under Never: kill the pod",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addInitContainers(p)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerUnknown}})
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "init containers removed but an app container runs: initialised",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "init containers, sandbox dead: new sandbox from the first init container",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited}, "init2": {State: kubecontainer.ContainerExited}})
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Init: []int{0}},
		},
		{
			name: "OnFailure, sandbox dead, apps succeeded and init done: no new sandbox",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				addInitContainers(p)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				allExited(s, 0)
				s.ContainerStatuses = append(s.ContainerStatuses,
					&kubecontainer.ContainerStatus{ID: "i2", Name: "init2", State: kubecontainer.ContainerExited, Init: true},
					&kubecontainer.ContainerStatus{ID: "i1", Name: "init1", State: kubecontainer.ContainerExited, Init: true})
			},
			want: plan{KillPod: true, SandboxID: "sandboxID", Attempt: 1},
		},
		{
			name: "sidecars, new pod: sandbox and the first sidecar only",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				s.SandboxStatuses, s.ContainerStatuses = nil, nil
			},
			want: plan{KillPod: true, CreateSandbox: true, Init: []int{0}},
		},
		{
			name: "first sidecar running (no startup probe): the next one starts, the first is not waited on",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				s.ContainerStatuses = nil
				setSidecar(p, s, "side1", nil)
			},
			want: plan{SandboxID: "sandboxID", Init: []int{1}},
		},
		{
			name: "sidecar whose startup probe has not passed: the next one waits",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
				s.ContainerStatuses = nil
				setSidecar(p, s, "side1", nil)
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "sidecar whose startup probe passed: the next one starts",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
				s.ContainerStatuses = nil
				setSidecar(p, s, "side1", nil)
			},
			probes: Probes{Startup: fakeProbes{"side1-id": kubecontainer.ProbeSuccess}},
			want:   plan{SandboxID: "sandboxID", Init: []int{1}},
		},
		{
			name: "sidecar failed its startup probe: kill and restart it",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				p.Spec.InitContainers[0].StartupProbe = &corev1.Probe{}
				s.ContainerStatuses = nil
				setSidecar(p, s, "side1", nil)
			},
			probes: Probes{Startup: fakeProbes{"side1-id": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Init: []int{0}, Kill: []string{"side1/side1-id/StartupProbe"}},
		},
		{
			name: "both sidecars running: initialised, the app containers start",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				s.ContainerStatuses = nil
				setSidecar(p, s, "side1", nil)
				setSidecar(p, s, "side2", nil)
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0, 1, 2}},
		},
		{
			name: "converged pod with sidecars: nothing to do",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				setSidecar(p, s, "side1", nil)
				setSidecar(p, s, "side2", nil)
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "sidecar exited while the pod runs, restart policy Never: restart it",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addSidecars(p)
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.State, cs.ExitCode = kubecontainer.ContainerExited, 0 })
				setSidecar(p, s, "side2", nil)
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}},
		},
		{
			name: "both sidecars crashed while the pod runs: restart both, in spec order",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.State, cs.ExitCode = kubecontainer.ContainerExited, 1 })
				setSidecar(p, s, "side2", func(cs *kubecontainer.ContainerStatus) { cs.State, cs.ExitCode = kubecontainer.ContainerExited, 1 })
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0, 1}},
		},
		{
			name: "sidecar removed while the pod runs: start it again",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				setSidecar(p, s, "side2", nil)
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}},
		},
		{
			name: "sidecar failed its liveness probe: kill and restart it",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				setSidecar(p, s, "side1", nil)
				setSidecar(p, s, "side2", nil)
			},
			probes: Probes{Liveness: fakeProbes{"side2-id": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Init: []int{1}, Kill: []string{"side2/side2-id/LivenessProbe"}},
		},
		{
			name: "sidecar spec changed: kill and restart it",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addSidecars(p)
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.Hash = "old" })
				setSidecar(p, s, "side2", nil)
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}, Kill: []string{"side1/side1-id/SpecChanged"}},
		},
		{
			name: "sidecar unknown: kill and restart it, even under Never",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addSidecars(p)
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.State = kubecontainer.ContainerUnknown })
				setSidecar(p, s, "side2", nil)
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}, Kill: []string{"side1/side1-id/Unknown"}},
		},
		{
			name: "app containers finished under Never, sidecars running: kill the pod, restart no sidecar",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addSidecars(p)
				allExited(s, 0)
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.State = kubecontainer.ContainerExited })
				setSidecar(p, s, "side2", nil)
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "sidecars, apps succeeded under OnFailure, sandbox dead: a new sandbox, as kubelet (the pod workers never sync a finished pod)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
				addSidecars(p)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				allExited(s, 0)
				setSidecar(p, s, "side1", func(cs *kubecontainer.ContainerStatus) { cs.State = kubecontainer.ContainerExited })
			},
			want: plan{KillPod: true, SandboxID: "sandboxID", Attempt: 1, CreateSandbox: true, Init: []int{0}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod, status := makeBasePodAndStatus()
			if tc.mutate != nil {
				tc.mutate(pod, status)
			}
			got := ComputePodActions(pod, status, tc.probes)
			if !reflect.DeepEqual(planOf(got), tc.want) {
				t.Errorf("got  %+v\nwant %+v\nplan: %s", planOf(got), tc.want, got)
			}
		})
	}
}

// restartRule: action Restart when the exit code is (In) or is not (NotIn)
// one of codes.
func restartRule(op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) []corev1.ContainerRestartRule {
	return []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes},
	}}
}

// TestComputePodActionsWithContainerRestartRules: a container's own
// restartPolicy and restartPolicyRules (kubelet's
// TestComputePodActionsWithContainerRestartRules, its rows first).
func TestComputePodActionsWithContainerRestartRules(t *testing.T) {
	policy := func(p corev1.ContainerRestartPolicy) *corev1.ContainerRestartPolicy { return &p }
	exit := func(s *kubecontainer.PodStatus, i int, code int32) {
		s.ContainerStatuses[i].State, s.ContainerStatuses[i].ExitCode = kubecontainer.ContainerExited, code
	}
	tests := []struct {
		name   string
		mutate func(pod *corev1.Pod, status *kubecontainer.PodStatus)
		probes Probes
		want   plan
	}{
		{
			name: "restart exited containers if their RestartPolicy is Always (pod Never)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyAlways)
				p.Spec.Containers[1].RestartPolicy = policy(corev1.ContainerRestartPolicyAlways)
				exit(s, 0, 0)
				exit(s, 1, 111)
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0, 1}},
		},
		{
			name: "restart failed containers if their RestartPolicy is OnFailure (pod Never)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				p.Spec.Containers[1].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				exit(s, 0, 0)
				exit(s, 1, 111)
			},
			want: plan{SandboxID: "sandboxID", Start: []int{1}},
		},
		{
			name: "restart created but not started containers if their RestartPolicy is OnFailure (pod Never)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				p.Spec.Containers[1].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				exit(s, 0, 0)
				s.ContainerStatuses[1].State = kubecontainer.ContainerCreated
			},
			want: plan{SandboxID: "sandboxID", Start: []int{1}},
		},
		{
			name: "don't restart containers if their RestartPolicy is Never (pod Always)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
				p.Spec.Containers[1].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
				exit(s, 0, 0)
				exit(s, 1, 111)
			},
			want: plan{SandboxID: "sandboxID"},
		},
		{
			name: "sandbox dead: kill the pod and recreate every container but the succeeded one whose RestartPolicy is OnFailure",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[1].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				exit(s, 1, 0)
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Start: []int{0, 2}},
		},
		{
			name: "a rule's exit code restarts the container whatever its RestartPolicy Never",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				for i := range p.Spec.Containers[:2] {
					p.Spec.Containers[i].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
					p.Spec.Containers[i].RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
				}
				exit(s, 0, 42)
				exit(s, 1, 1)
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0}},
		},
		{
			name: "no rule matching: the container's RestartPolicy decides, not the pod's",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				p.Spec.Containers[0].RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
				exit(s, 0, 3)
			},
			want: plan{SandboxID: "sandboxID", Start: []int{0}},
		},
		{
			name: "NotIn: every exit code but those listed restarts",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				for i := range p.Spec.Containers[:2] {
					p.Spec.Containers[i].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
					p.Spec.Containers[i].RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 7)
				}
				exit(s, 0, 7)
				exit(s, 1, 9)
			},
			want: plan{SandboxID: "sandboxID", Start: []int{1}},
		},
		{
			name: "every container done and none restarts under pod Always: kill the pod",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				for i := range p.Spec.Containers {
					p.Spec.Containers[i].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
					exit(s, i, 1)
				}
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
		{
			name: "liveness failure: a container whose RestartPolicy is Never is killed, not restarted (rules need an exit code)",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
				p.Spec.Containers[0].RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpNotIn)
				p.Spec.Containers[0].LivenessProbe = &corev1.Probe{}
				s.ContainerStatuses[0].Hash = HashContainer(&p.Spec.Containers[0])
			},
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name: "liveness failure: a container whose RestartPolicy is OnFailure is restarted in a pod Never",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				p.Spec.Containers[0].LivenessProbe = &corev1.Probe{}
				s.ContainerStatuses[0].Hash = HashContainer(&p.Spec.Containers[0])
			},
			probes: Probes{Liveness: fakeProbes{"id1": kubecontainer.ProbeFailure}},
			want:   plan{SandboxID: "sandboxID", Start: []int{0}, Kill: []string{"foo1/id1/LivenessProbe"}},
		},
		{
			name: "sandbox dead under pod Never: a new one for the container a rule restarts, and only it",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
				p.Spec.Containers[0].RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				exit(s, 0, 42)
				exit(s, 1, 0)
				exit(s, 2, 1)
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandboxID", Attempt: 1, Start: []int{0}},
		},
		{
			name: "sandbox dead under pod Never, the rule not matched: the pod is done, no new sandbox",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
				p.Spec.Containers[0].RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				for i := range s.ContainerStatuses {
					exit(s, i, 1)
				}
			},
			want: plan{KillPod: true, SandboxID: "sandboxID", Attempt: 1},
		},
		{
			name: "failed init container whose RestartPolicy is OnFailure runs again in a pod Never",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				addInitContainers(p)
				p.Spec.InitContainers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyOnFailure)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited, ExitCode: 1}})
			},
			want: plan{SandboxID: "sandboxID", Init: []int{0}},
		},
		{
			name: "failed init container whose RestartPolicy is Never kills a pod Always",
			mutate: func(p *corev1.Pod, s *kubecontainer.PodStatus) {
				addInitContainers(p)
				p.Spec.InitContainers[0].RestartPolicy = policy(corev1.ContainerRestartPolicyNever)
				setInitStatuses(p, s, map[string]*kubecontainer.ContainerStatus{"init1": {State: kubecontainer.ContainerExited, ExitCode: 1}})
			},
			want: plan{KillPod: true, SandboxID: "sandboxID"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod, status := makeBasePodAndStatus()
			tc.mutate(pod, status)
			got := ComputePodActions(pod, status, tc.probes)
			if !reflect.DeepEqual(planOf(got), tc.want) {
				t.Errorf("got  %+v\nwant %+v\nplan: %s", planOf(got), tc.want, got)
			}
		})
	}
}

func TestPodActionsString(t *testing.T) {
	pod, status := makeBasePodAndStatus()
	pod.Spec.Containers[1].Image = "busybox:2"
	got := ComputePodActions(pod, status, Probes{}).String()
	want := `KillPod=false CreateSandbox=false SandboxID=sandboxID Attempt=0 Start=[1] Kill=[foo2(id2) SpecChanged: Container foo2 definition changed, will be restarted]`
	if got != want {
		t.Errorf("String() = %q\nwant       %q", got, want)
	}
}
