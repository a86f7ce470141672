package podworkers_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// Container restart policies and rules (KEP-5307) on the embedded runtime.

func containerPolicy(p corev1.ContainerRestartPolicy) *corev1.ContainerRestartPolicy { return &p }

func sh(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox:1.36", Command: []string{"sh", "-c", script}}
}

// startsOf counts the ContainerStarted events of the pod uid's container name.
func (s *sink) startsOf(uid, name string) int {
	n := 0
	for _, ev := range s.ofType(uid, schemas.EventContainerStarted) {
		if ev.Container == name {
			n++
		}
	}
	return n
}

func TestARestartRuleRestartsOnItsExitCodeOnly(t *testing.T) {
	n := newNode(t)
	n.run()
	// The first run exits 42, which the rule restarts; the second exits 1,
	// which it does not, nor do the container's and the pod's Never.
	app := sh("app", "if [ -e /d/ran ]; then exit 1; fi; touch /d/ran; exit 42")
	app.RestartPolicy = containerPolicy(corev1.ContainerRestartPolicyNever)
	app.RestartPolicyRules = []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	app.VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/d"}}
	want := applySpec("rules", corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{app},
		Volumes:       []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	})
	mustSync(t, n.w, want)
	if !n.w.WillRestart("rules", "app", 42) || n.w.WillRestart("rules", "app", 1) {
		t.Errorf("WillRestart after 42, after 1 = %t, %t; want true, false", n.w.WillRestart("rules", "app", 42), n.w.WillRestart("rules", "app", 1))
	}
	// Failed is published before the worker has killed the sandbox (its
	// network's teardown takes a while): wait for both.
	poll.Until(t, 30*time.Second, poll.Msg("the pod to fail after its second exit, its sandbox killed"), func() bool {
		st := n.sink.lastStatus("rules")
		return st != nil && st.Phase == schemas.PhaseFailed && st.Sandbox != nil && st.Sandbox.State == schemas.SandboxNotReady
	})
	c := n.sink.lastStatus("rules").Containers[0]
	if c.State != schemas.ContainerExited || c.ExitCode != 1 || c.RestartCount != 1 || c.LastState == nil || c.LastState.ExitCode != 42 {
		t.Errorf("container: %s exit %d after %d restarts, last state %+v; want exited 1 after 1 restart, last exit 42", c.State, c.ExitCode, c.RestartCount, c.LastState)
	}
	if rep := mustSync(t, n.w, want); len(rep.Actions) != 0 || rep.Status.Phase != schemas.PhaseFailed {
		t.Errorf("sync of the failed pod: %+v", rep)
	}
	if starts := n.sink.startsOf("rules", "app"); starts != 2 {
		t.Errorf("app started %d times, want twice", starts)
	}
}

func TestAContainerWhosePolicyIsNeverStaysExitedWhileThePodRuns(t *testing.T) {
	n := newNode(t)
	n.run()
	dir := t.TempDir()
	// app runs until the test says stop, then succeeds: its OnFailure does
	// not restart it. once fails at once: its Never does not restart it,
	// whatever the pod's Always.
	app := sh("app", "while [ ! -e /d/stop ]; do sleep 0.05; done")
	app.RestartPolicy = containerPolicy(corev1.ContainerRestartPolicyOnFailure)
	app.VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/d"}}
	once := sh("once", "exit 1")
	once.RestartPolicy = containerPolicy(corev1.ContainerRestartPolicyNever)
	want := applySpec("never", corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyAlways,
		Containers:    []corev1.Container{app, once},
		Volumes:       []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}},
	})
	mustSync(t, n.w, want)
	poll.Until(t, 30*time.Second, poll.Msg("once to exit while app runs"), func() bool {
		st := n.sink.lastStatus("never")
		return st != nil && st.Containers[1].State == schemas.ContainerExited && st.Containers[0].State == schemas.ContainerRunning
	})
	rep := mustSync(t, n.w, want)
	if len(rep.Actions) != 0 || rep.Status.Phase != schemas.PhaseRunning || rep.Status.Containers[1].RestartCount != 0 {
		t.Errorf("sync with once exited: %d actions %+v, phase %s, once restarted %d times; want none, Running, 0",
			len(rep.Actions), rep.Actions, rep.Status.Phase, rep.Status.Containers[1].RestartCount)
	}

	// Every container done and none to restart: Failed (one failed), though
	// the pod's policy is Always.
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, poll.Msg("the pod to fail and its sandbox to stop"), func() bool {
		st := n.sink.lastStatus("never")
		return st != nil && st.Phase == schemas.PhaseFailed && (st.Sandbox == nil || st.Sandbox.State != schemas.SandboxReady)
	})
	if rep := mustSync(t, n.w, want); len(rep.Actions) != 0 || rep.Status.Phase != schemas.PhaseFailed {
		t.Errorf("sync of the failed pod: %+v", rep)
	}
	for _, name := range []string{"app", "once"} {
		if starts := n.sink.startsOf("never", name); starts != 1 {
			t.Errorf("%s started %d times, want once", name, starts)
		}
	}
}
