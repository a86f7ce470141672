package e2e_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/poll"
)

// probeServer serves HTTP (/ready while a file exists) and the gRPC health
// service from a container: the embedded runtime runs host binaries, which
// a container sees when their directory is mounted (see sharing).
var probeServer = &gobuild.Command{Pkg: "github.com/jetlet/jetlet/test/e2e/probeserver", Name: "probeserver", Static: true}

// probePodJSON is an apply intent for a pod of containers under Always.
func probePodJSON(t testing.TB, uid string, rev int64, containers ...corev1.Container) string {
	t.Helper()
	grace := int64(2)
	for i := range containers {
		containers[i].Image, containers[i].ImagePullPolicy = "busybox:1.36", corev1.PullIfNotPresent
	}
	body, err := json.Marshal(schemas.PodIntent{APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Revision: rev,
		Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, Containers: containers},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func execProbe(period, failures int32, script string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", script}}},
		PeriodSeconds: period, FailureThreshold: failures,
	}
}

// freePort is a TCP port nothing listens on now, for a container to take.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func condition(st *schemas.PodStatus, typ schemas.PodConditionType) schemas.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return schemas.PodCondition{}
}

func TestLivenessExecFailureRestartsTheContainer(t *testing.T) {
	t.Parallel()
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	// The probe passes three times, then fails for ever (the count is kept
	// outside the container, so the restarted instance fails at once).
	dir := shortDir(t)
	count := filepath.Join(dir, "count")
	script := `n=$(cat ` + count + ` 2>/dev/null || echo 0); n=$((n+1)); echo $n > ` + count + `; echo "check $n"; [ $n -le 3 ]`
	n.publish("live", sharing(t, probePodJSON(t, "live", 1, corev1.Container{
		Name: "app", Command: []string{"/bin/sh", "-c", "exec sleep 600"}, LivenessProbe: execProbe(1, 3, script),
	}), dir))
	if r := n.results("live", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s", r.Outcome, r.Error)
	}
	first := n.waitEvent("live", schemas.EventContainerStarted, 30*time.Second, nil)
	unhealthy := n.waitEvent("live", schemas.EventUnhealthy, 60*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ContainerID == first.ContainerID
	})
	if unhealthy.Probe != schemas.ProbeLiveness || unhealthy.Message != "Liveness probe failed: check 4\n" {
		t.Errorf("Unhealthy %+v, want the liveness probe's fourth check (three passed, one failed)", unhealthy)
	}
	killed := n.waitEvent("live", schemas.EventContainerKilled, 30*time.Second, nil)
	if killed.Reason != schemas.ReasonLivenessProbe || killed.ContainerID != first.ContainerID {
		t.Fatalf("ContainerKilled %+v, want reason LivenessProbe of %s", killed, first.ContainerID)
	}
	second := n.waitEvent("live", schemas.EventContainerStarted, 30*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ContainerID != first.ContainerID
	})
	if second.Attempt != 1 {
		t.Errorf("the restarted instance has attempt %d, want 1", second.Attempt)
	}
	n.waitStatus("live", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Containers[0].RestartCount >= 1 })
	// The new instance fails its probe at once: killed again, then backed off.
	n.waitEvent("live", schemas.EventContainerKilled, 60*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ContainerID == second.ContainerID && ev.Reason == schemas.ReasonLivenessProbe
	})
	n.waitEvent("live", schemas.EventBackOff, 60*time.Second, nil)
	st := n.waitStatus("live", 30*time.Second, func(st *schemas.PodStatus) bool {
		return st.Containers[0].Reason == "CrashLoopBackOff"
	})
	if st.Containers[0].Ready || condition(st, schemas.PodReady).Status != schemas.ConditionFalse {
		t.Errorf("a container backing off is reported ready: %+v", st)
	}
	// One Unhealthy per failed probe: the failureThreshold of 3 per instance,
	// after which the instance is killed and probed no more.
	evs := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.live."+string(schemas.EventUnhealthy))
	perInstance := map[string]int{}
	for _, ev := range evs {
		perInstance[ev.ContainerID]++
	}
	for id, c := range perInstance {
		if c != 3 {
			t.Errorf("%d Unhealthy events for instance %s, want 3", c, id)
		}
	}
}

func TestHTTPReadinessFlipsReadyBothWays(t *testing.T) {
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	dir, bin := shortDir(t), probeServer.Path(t)
	ready := filepath.Join(dir, "ready")
	port := freePort(t)
	n.publish("web", sharing(t, probePodJSON(t, "web", 1, corev1.Container{
		Name:    "app",
		Command: []string{bin, "-http", ":" + strconv.Itoa(port), "-ready-file", ready},
		Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 1,
		},
	}), dir, filepath.Dir(bin)))
	st := n.waitStatus("web", 30*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning && len(st.Conditions) == 3
	})
	if c := st.Containers[0]; c.Ready || !c.Started || condition(st, schemas.PodReady).Status != schemas.ConditionFalse ||
		condition(st, schemas.PodInitialized).Status != schemas.ConditionTrue {
		t.Fatalf("before the file exists: %+v", st)
	}
	initialized := condition(st, schemas.PodInitialized).LastTransitionTime

	flip := func(want bool) {
		t.Helper()
		at := time.Now()
		if want {
			if err := os.WriteFile(ready, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(ready); err != nil {
			t.Fatal(err)
		}
		wantStatus := schemas.ConditionFalse
		if want {
			wantStatus = schemas.ConditionTrue
		}
		st := n.waitStatus("web", 30*time.Second, func(st *schemas.PodStatus) bool {
			return st.Containers[0].Ready == want && condition(st, schemas.PodReady).Status == wantStatus &&
				condition(st, schemas.PodContainersReady).Status == wantStatus
		})
		// Within two periods (1 s each) on an idle machine; logged, not
		// asserted: the test does not time the machine.
		t.Logf("ready=%v seen in the status %v after the change", want, time.Since(at))
		if got := condition(st, schemas.PodInitialized).LastTransitionTime; !got.Equal(initialized) {
			t.Errorf("Initialized moved from %v to %v while its status stayed", initialized, got)
		}
		if got := condition(st, schemas.PodReady).LastTransitionTime; got.Before(at.Add(-time.Second)) {
			t.Errorf("Ready's lastTransitionTime %v is older than the flip at %v", got, at)
		}
	}
	flip(true)
	flip(false)
	flip(true)
	if unhealthy := n.waitEvent("web", schemas.EventUnhealthy, 10*time.Second, func(ev schemas.LifecycleEvent) bool {
		return strings.Contains(ev.Message, "statuscode: 503")
	}); unhealthy.Probe != schemas.ProbeReadiness || !strings.Contains(unhealthy.ID, ".Readiness.") {
		t.Errorf("Unhealthy %+v, want the readiness probe's 503", unhealthy)
	}
	if killed := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.web."+string(schemas.EventContainerKilled)); len(killed) != 0 {
		t.Errorf("a readiness failure killed a container: %+v", killed)
	}
}

func TestStartupProbeHoldsLivenessOff(t *testing.T) {
	t.Parallel()
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	dir := shortDir(t)
	started, checks := filepath.Join(dir, "started"), filepath.Join(dir, "checks")
	n.publish("slow", sharing(t, probePodJSON(t, "slow", 1, corev1.Container{
		Name:    "app",
		Command: []string{"/bin/sh", "-c", "exec sleep 600"},
		// Counts its checks and passes once the file exists.
		StartupProbe: execProbe(1, 60, "echo x >> "+checks+"; test -f "+started),
		// Would kill the container at its first check.
		LivenessProbe: execProbe(1, 1, "echo dead; exit 1"),
	}), dir))
	poll.Until(t, 60*time.Second, poll.Msg("five startup checks"), func() bool {
		data, _ := os.ReadFile(checks)
		return strings.Count(string(data), "x") >= 5
	})
	st, _ := n.status("slow")
	if st == nil || st.Containers[0].Started || st.Containers[0].RestartCount != 0 {
		t.Fatalf("while the startup probe fails: %+v, want not started and never restarted", st)
	}
	if killed := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.slow."+string(schemas.EventContainerKilled)); len(killed) != 0 {
		t.Fatalf("the liveness probe ran before the start: %+v", killed)
	}
	if err := os.WriteFile(started, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Started, and then the liveness probe runs and kills it.
	killed := n.waitEvent("slow", schemas.EventContainerKilled, 60*time.Second, nil)
	if killed.Reason != schemas.ReasonLivenessProbe {
		t.Errorf("ContainerKilled %+v, want LivenessProbe", killed)
	}
}

func TestTCPSocketAndGRPCProbes(t *testing.T) {
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	tcpPort, grpcPort := freePort(t), freePort(t)
	bin := probeServer.Path(t)
	n.publish("net", sharing(t, probePodJSON(t, "net", 1,
		corev1.Container{
			Name:    "tcp",
			Command: []string{bin, "-http", ":" + strconv.Itoa(tcpPort)},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(tcpPort)}}},
		},
		corev1.Container{
			Name:    "grpc",
			Command: []string{bin, "-grpc", ":" + strconv.Itoa(grpcPort)},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(grpcPort)}}},
			// A health service that does not exist: the liveness probe
			// fails and kills the container.
			LivenessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2, InitialDelaySeconds: 3,
				ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(grpcPort), Service: new("no-such-service")}}},
		},
	), filepath.Dir(bin)))
	n.waitStatus("net", 30*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 2 && st.Containers[0].Ready && st.Containers[1].Ready
	})
	killed := n.waitEvent("net", schemas.EventContainerKilled, 60*time.Second, nil)
	// A readiness check may fail too, before a server listens: only the
	// liveness failure says why the container was killed.
	unhealthy := n.waitEvent("net", schemas.EventUnhealthy, 10*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.Probe == schemas.ProbeLiveness
	})
	if killed.Container != "grpc" || killed.Reason != schemas.ReasonLivenessProbe || !strings.Contains(unhealthy.Message, "NotFound") {
		t.Errorf("ContainerKilled %+v, Unhealthy %+v: want the grpc container killed for its liveness probe", killed, unhealthy)
	}
}

// A probe whose command cannot be started is kubelet's "probe errored": an
// Unhealthy event saying so, and a result thrown away (the liveness probe
// with failureThreshold 1 does not kill the container).
func TestAProbeThatCannotRunIsReportedAsErrored(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	noSuch := func(name string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/no/such/" + name}}},
			PeriodSeconds: 1, FailureThreshold: 1}
	}
	n.publish("errored", probePodJSON(t, "errored", 1, corev1.Container{
		Name: "app", Command: []string{"/bin/sh", "-c", "exec sleep 600"}, LivenessProbe: noSuch("live"), ReadinessProbe: noSuch("ready"),
	}))
	if r := n.results("errored", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s", r.Outcome, r.Error)
	}
	started := n.waitEvent("errored", schemas.EventContainerStarted, 30*time.Second, nil)
	n.waitEvent("errored", schemas.EventUnhealthy, 30*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.Probe == schemas.ProbeReadiness && strings.HasPrefix(ev.Message, "Readiness probe errored: ") && strings.Contains(ev.Message, "/no/such/ready")
	})
	var livenessErrors []schemas.LifecycleEvent
	poll.Until(t, 30*time.Second, poll.Msg("three liveness probes that errored"), func() bool {
		livenessErrors = livenessErrors[:0]
		for _, ev := range readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.errored."+string(schemas.EventUnhealthy)) {
			if ev.Probe == schemas.ProbeLiveness {
				livenessErrors = append(livenessErrors, ev)
			}
		}
		return len(livenessErrors) >= 3
	})
	for _, ev := range livenessErrors {
		if !strings.HasPrefix(ev.Message, "Liveness probe errored: ") || ev.ContainerID != started.ContainerID {
			t.Errorf("liveness event %+v, want an error of %s", ev, started.ContainerID)
		}
	}
	if killed := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.errored."+string(schemas.EventContainerKilled)); len(killed) != 0 {
		t.Errorf("the container was killed for a liveness probe that could not run: %+v", killed)
	}
	st := n.waitStatus("errored", 10*time.Second, func(st *schemas.PodStatus) bool { return len(st.Containers) == 1 })
	if st.Containers[0].Ready || st.Containers[0].RestartCount != 0 {
		t.Errorf("status %+v, want the container running, not ready, never restarted", st.Containers[0])
	}
}
