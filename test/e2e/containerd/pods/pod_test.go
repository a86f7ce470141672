package containerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// running is a status with the pod Running and its one container running.
func running(st *schemas.PodStatus) bool {
	return st.Phase == schemas.PhaseRunning && len(st.Containers) == 1 && st.Containers[0].State == schemas.ContainerRunning
}

func TestPodStartsAndRuns(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("start")
	seq := n.publish(uid, s.podJSON(uid, 1, "Always", "echo started; "+untilTerm))
	r := n.waitResult(uid, seq, 60*time.Second)
	if r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	st := n.waitStatus(uid, 60*time.Second, "Running", running)
	c := st.Containers[0]
	if c.RestartCount != 0 || !c.Ready || c.ContainerID == "" {
		t.Errorf("container status %+v: want ready, a container id and no restart", c)
	}
	if st.Sandbox == nil || st.Sandbox.State != schemas.SandboxReady {
		t.Errorf("sandbox status %+v, want Ready", st.Sandbox)
	}
	started := n.waitEvent(uid, schemas.EventContainerStarted, 30*time.Second, nil)
	if started.ContainerID != c.ContainerID || started.Container != "app" {
		t.Errorf("ContainerStarted for %s (%s), want app (%s)", started.Container, started.ContainerID, c.ContainerID)
	}
	n.waitEvent(uid, schemas.EventSandboxCreated, 30*time.Second, nil)
	s.waitLog(c.ContainerID, "started", 30*time.Second)

	// What containerd itself says: one ready host-network sandbox, one
	// running container from the test image.
	ctx := context.Background()
	sbs := s.podSandboxes(uid)
	if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY || sbs[0].Id != st.Sandbox.ID {
		t.Fatalf("runtime lists sandboxes %v for the pod, want %s ready", sbs, st.Sandbox.ID)
	}
	sbst, err := s.cri.PodSandboxStatus(ctx, sbs[0].Id, false)
	if err != nil {
		t.Fatal(err)
	}
	if nw := sbst.GetStatus().GetLinux().GetNamespaces().GetOptions().GetNetwork(); nw != runtimeapi.NamespaceMode_NODE {
		t.Errorf("sandbox network namespace mode %s, want NODE (hostNetwork)", nw)
	}
	cs := s.podContainers(uid)
	if len(cs) != 1 || cs[0].Id != c.ContainerID || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("runtime lists containers %v for the pod, want %s running", cs, c.ContainerID)
	}
	cst, err := s.cri.ContainerStatus(ctx, c.ContainerID, false)
	if err != nil {
		t.Fatal(err)
	}
	if img := cst.GetStatus().GetImage().GetImage(); img != s.env.image {
		t.Errorf("container image %q, want %q", img, s.env.image)
	}
	t.Logf("pod %s: sandbox %s, container %s (%s, image ref %s)", uid, sbs[0].Id, c.ContainerID, c.Image, cst.GetStatus().GetImageRef())
}

func TestCrashingContainerIsRestartedWithBackOff(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("crash")
	seq := n.publish(uid, s.podJSON(uid, 1, "Always", "echo dying; exit 1"))
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	died := n.waitEvent(uid, schemas.EventContainerDied, 30*time.Second, nil)
	if died.ExitCode == nil || *died.ExitCode != 1 || died.Reason != schemas.ReasonError {
		b, _ := json.Marshal(died)
		t.Errorf("ContainerDied %s: want exit code 1, reason Error", b)
	}
	first := n.waitStatus(uid, 60*time.Second, "restarted once", func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].RestartCount >= 1
	})
	backoff := n.waitEvent(uid, schemas.EventBackOff, 60*time.Second, nil)
	t.Logf("BackOff: %s", backoff.Message)
	st := n.waitStatus(uid, 60*time.Second, "in CrashLoopBackOff", func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].Reason == "CrashLoopBackOff"
	})
	if c := st.Containers[0]; c.ExitCode != 1 || c.State == schemas.ContainerRunning {
		t.Errorf("container in back-off: state %s exit code %d, want not running, exit code 1", c.State, c.ExitCode)
	}
	// The back-off ends and the container runs (and dies) again: the count
	// grows past the one seen first.
	grown := n.waitStatus(uid, 90*time.Second, "restarted again", func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].RestartCount > first.Containers[0].RestartCount
	})
	// Every restart followed a death: at least as many ContainerDied events
	// as restarts, each with exit code 1.
	restarts := int(grown.Containers[0].RestartCount)
	var deaths []schemas.LifecycleEvent
	poll.Until(t, 30*time.Second, func() string {
		return fmt.Sprintf("%d ContainerDied events for %d restarts", len(deaths), restarts)
	}, func() bool {
		deaths = n.events(uid, schemas.EventContainerDied)
		return len(deaths) >= restarts
	})
	for _, ev := range deaths {
		if ev.ExitCode == nil || *ev.ExitCode != 1 {
			b, _ := json.Marshal(ev)
			t.Errorf("ContainerDied %s: want exit code 1", b)
		}
	}
	t.Logf("restart count %d then %d; %d ContainerDied events", first.Containers[0].RestartCount, grown.Containers[0].RestartCount, len(deaths))
}

func TestDeleteKillsProcessIgnoringSIGTERMAfterGrace(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("stubborn")
	st := n.applyRunning(uid, s.podJSON(uid, 1, "Always", "trap '' TERM; echo trap-set; while true; do sleep 1; done"))
	cid, sbid := st.Containers[0].ContainerID, st.Sandbox.ID
	n.waitEvent(uid, schemas.EventContainerStarted, 30*time.Second, nil)
	// The shell logs after it has set the trap: SIGTERM is ignored from here.
	s.waitLog(cid, "trap-set", 30*time.Second)

	seq := n.publish(uid, deleteJSON(uid, 2, 3))
	r := n.waitResult(uid, seq, 60*time.Second)
	if r.Outcome != schemas.OutcomeSynced || r.Op != schemas.OpDelete {
		t.Fatalf("delete: %s %s %q %+v", r.Op, r.Outcome, r.Error, r.Actions)
	}
	b, _ := json.Marshal(r.Actions)
	t.Logf("delete actions: %s (received %s, finished %s later)", b, r.ReceivedAt.Format(time.RFC3339Nano), r.FinishedAt.Sub(r.ReceivedAt))
	killed := n.waitEvent(uid, schemas.EventContainerKilled, 30*time.Second, nil)
	if killed.ContainerID != cid || killed.Reason != schemas.ReasonPodDeleted {
		b, _ := json.Marshal(killed)
		t.Errorf("ContainerKilled %s: want container %s, reason PodDeleted", b, cid)
	}
	n.waitEvent(uid, schemas.EventPodTerminated, 30*time.Second, nil)
	final := n.waitStatus(uid, 30*time.Second, "Terminated", func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseTerminated })
	fb, _ := json.Marshal(final)
	t.Logf("final status %s", fb)

	// Only SIGKILL ends that shell: its one ContainerDied says 137.
	n.waitEvent(uid, schemas.EventContainerDied, 30*time.Second, func(ev schemas.LifecycleEvent) bool { return ev.ContainerID == cid })
	var died []schemas.LifecycleEvent
	for _, ev := range n.events(uid, schemas.EventContainerDied) {
		if ev.ContainerID == cid {
			died = append(died, ev)
		}
	}
	if b, _ := json.Marshal(died); len(died) != 1 || died[0].ExitCode == nil || *died[0].ExitCode != 137 {
		t.Errorf("ContainerDied events of %s: %s; want exactly one, exit code 137 (SIGKILL after the grace period)", cid, b)
	}
	// containerd's own log says what happened: StopContainer with the
	// pod's grace period as its timeout, SIGTERM, and SIGKILL once the
	// timeout ran out.
	s.waitContainerdLog(30*time.Second,
		`StopContainer for \"`+cid+`\" with timeout 3 (s)`,
		`Stop container \"`+cid+`\" with signal terminated`,
		`Kill container \"`+cid+`\"`)
	// containerd has nothing of the pod left.
	if sbs := s.podSandboxes(uid); len(sbs) != 0 {
		t.Errorf("runtime still lists sandboxes %v of the deleted pod (was %s)", sbs, sbid)
	}
	if cs := s.podContainers(uid); len(cs) != 0 {
		t.Errorf("runtime still lists containers %v of the deleted pod (was %s)", cs, cid)
	}
	if _, err := s.cri.ContainerStatus(context.Background(), cid, false); err == nil {
		t.Errorf("ContainerStatus %s answers after the delete, want NotFound", cid)
	}
}

func TestRestartAfterSIGKILLAdoptsRunningContainers(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("adopt")
	spec := "echo up; " + untilTerm
	before := n.applyRunning(uid, s.podJSON(uid, 1, "Always", spec))
	cid := before.Containers[0].ContainerID
	n.waitEvent(uid, schemas.EventContainerStarted, 30*time.Second, nil)
	ctx := context.Background()
	cst, err := s.cri.ContainerStatus(ctx, cid, false)
	if err != nil {
		t.Fatal(err)
	}
	startedAt := cst.GetStatus().GetStartedAt()

	n.kill9()
	t.Logf("jetlet killed; container %s started at %s", cid, time.Unix(0, startedAt).Format(time.RFC3339Nano))
	// The container outlives jetlet.
	if cst, err := s.cri.ContainerStatus(ctx, cid, false); err != nil || cst.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after SIGKILL of jetlet: container %s: %v %v, want running", cid, cst.GetStatus().GetState(), err)
	}
	// Same data dir and NATS port: the embedded NATS store is reused.
	n.start()
	// The same spec again (a new revision only): nothing to do.
	seq := n.publish(uid, s.podJSON(uid, 2, "Always", spec))
	r := n.waitResult(uid, seq, 60*time.Second)
	if r.Outcome != schemas.OutcomeSynced || len(r.Actions) != 0 {
		b, _ := json.Marshal(r.Actions)
		t.Errorf("after the restart: %s %q actions %s, want Synced with no action", r.Outcome, r.Error, b)
	}
	after := n.waitStatus(uid, 60*time.Second, "revision 2 and Running", func(st *schemas.PodStatus) bool {
		return st.Revision == 2 && running(st)
	})
	if a := after.Containers[0]; a.ContainerID != cid || a.RestartCount != 0 {
		t.Errorf("container %s (restarts %d) after the restart, want %s adopted with no restart", a.ContainerID, a.RestartCount, cid)
	}
	if after.Sandbox.ID != before.Sandbox.ID {
		t.Errorf("sandbox %s after the restart, want %s", after.Sandbox.ID, before.Sandbox.ID)
	}
	if evs := n.events(uid, schemas.EventContainerStarted); len(evs) != 1 {
		b, _ := json.Marshal(evs)
		t.Errorf("%d ContainerStarted events for the pod, want exactly 1: %s", len(evs), b)
	}
	// containerd agrees: one container, the same one, started once.
	cs := s.podContainers(uid)
	if len(cs) != 1 || cs[0].Id != cid || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("runtime lists containers %v for the pod, want only %s running", cs, cid)
	}
	if cst, err := s.cri.ContainerStatus(ctx, cid, false); err != nil || cst.GetStatus().GetStartedAt() != startedAt {
		t.Errorf("container %s: started at %d (%v), want %d: restarted", cid, cst.GetStatus().GetStartedAt(), err, startedAt)
	}
	if sbs := s.podSandboxes(uid); len(sbs) != 1 {
		t.Errorf("runtime lists %d sandboxes for the pod, want 1", len(sbs))
	}
}

// lifecyclePodJSON is an apply intent for a host-network pod (restart policy
// Never) with a hostPath volume of dir mounted at /shared in every container:
// the sidecar script (an init container with restartPolicy Always) when it
// is not empty, and the app container, whose lifecycle (JSON) may be empty.
func (s *suite) lifecyclePodJSON(uid, dir, sidecar, app, lifecycle string) string {
	cmd := func(script string) string {
		b, _ := json.Marshal([]string{"/bin/sh", "-c", script})
		return string(b)
	}
	mount := `"volumeMounts":[{"name":"shared","mountPath":"/shared"}]`
	container := func(name, script, extra string) string {
		return fmt.Sprintf(`{"name":%q,"image":%q,"imagePullPolicy":"IfNotPresent","command":%s,%s%s}`, name, s.env.image, cmd(script), mount, extra)
	}
	inits := ""
	if sidecar != "" {
		inits = `"initContainers":[` + container("proxy", sidecar, `,"restartPolicy":"Always"`) + `],`
	}
	if lifecycle != "" {
		lifecycle = `,"lifecycle":` + lifecycle
	}
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Never","hostNetwork":true,"terminationGracePeriodSeconds":10,
	      "volumes":[{"name":"shared","hostPath":{"path":%q,"type":"Directory"}}],
	      %s"containers":[%s]}}}`,
		uid, uid, runLabel, s.runID, dir, inits, container("app", app, lifecycle))
}

// lines is the file's words, one a line; none while it does not exist.
func lines(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), ",")
}

// On delete with a grace period, the preStop hook runs before the
// container's SIGTERM handler: both write to a shared file, in that order.
func TestPreStopRunsBeforeSIGTERMOnDelete(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("prestop")
	dir := shortDir(t)
	app := "trap 'echo term >> /shared/order; exit 0' TERM; echo up; sleep 3600 & wait"
	preStop := `{"preStop":{"exec":{"command":["/bin/sh","-c","echo prestop >> /shared/order"]}}}`
	st := n.applyRunning(uid, s.lifecyclePodJSON(uid, dir, "", app, preStop))
	s.waitLog(st.Containers[0].ContainerID, "up", 30*time.Second)

	seq := n.publish(uid, deleteJSON(uid, 2, 10))
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("delete: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	n.waitEvent(uid, schemas.EventPodTerminated, 30*time.Second, nil)
	if got := lines(t, filepath.Join(dir, "order")); got != "prestop,term" {
		t.Errorf("order %q, want prestop,term", got)
	}
	if evs := n.events(uid, schemas.EventFailedPreStopHook); len(evs) != 0 {
		t.Errorf("FailedPreStopHook events %+v", evs)
	}
}

// A sidecar runs beside the app container and, on delete, its SIGTERM
// handler runs after the app container's (which takes a second).
func TestSidecarStopsAfterTheAppContainer(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("sidecar")
	dir := shortDir(t)
	sidecar := "trap 'echo side >> /shared/order; exit 0' TERM; sleep 3600 & wait"
	app := "trap 'sleep 1; echo app >> /shared/order; exit 0' TERM; sleep 3600 & wait"
	seq := n.publish(uid, s.lifecyclePodJSON(uid, dir, sidecar, app, ""))
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	n.waitStatus(uid, 60*time.Second, "sidecar and app running", func(st *schemas.PodStatus) bool {
		return running(st) && len(st.InitContainers) == 1 && st.InitContainers[0].State == schemas.ContainerRunning
	})
	seq = n.publish(uid, deleteJSON(uid, 2, 10))
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("delete: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	n.waitEvent(uid, schemas.EventPodTerminated, 30*time.Second, nil)
	if got := lines(t, filepath.Join(dir, "order")); got != "app,side" {
		t.Errorf("order %q, want app,side", got)
	}
}
