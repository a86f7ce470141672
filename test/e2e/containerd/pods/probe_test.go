package containerd_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// probePodJSON is s.podJSON's pod (restart policy Always) whose container
// also has probes, a JSON fragment such as `"livenessProbe":{...}`.
func (s *suite) probePodJSON(uid string, rev int64, script, probes string) string {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Always","hostNetwork":true,"terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":"IfNotPresent","command":%s,%s}]}}}`,
		rev, uid, uid, runLabel, s.runID, s.env.image, cmd, probes)
}

func TestLivenessExecFailureRestartsTheContainer(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("liveness")
	// Passes three checks, then fails: each instance counts in its own
	// filesystem, so every instance is killed after its sixth check.
	check, _ := json.Marshal([]string{"/bin/sh", "-c",
		`n=$(cat /tmp/checks 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/checks; echo "check $n"; [ $n -le 3 ]`})
	probes := fmt.Sprintf(`"livenessProbe":{"exec":{"command":%s},"periodSeconds":1,"failureThreshold":3}`, check)
	seq := n.publish(uid, s.probePodJSON(uid, 1, untilTerm, probes))
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	first := n.waitEvent(uid, schemas.EventContainerStarted, 30*time.Second, nil)
	unhealthy := n.waitEvent(uid, schemas.EventUnhealthy, 60*time.Second, nil)
	if unhealthy.Probe != schemas.ProbeLiveness || unhealthy.ContainerID != first.ContainerID || unhealthy.Message != "Liveness probe failed: check 4\n" {
		b, _ := json.Marshal(unhealthy)
		t.Errorf("Unhealthy %s: want the liveness probe of %s failing its fourth check", b, first.ContainerID)
	}
	killed := n.waitEvent(uid, schemas.EventContainerKilled, 60*time.Second, nil)
	if killed.Reason != schemas.ReasonLivenessProbe || killed.ContainerID != first.ContainerID {
		b, _ := json.Marshal(killed)
		t.Fatalf("ContainerKilled %s: want reason LivenessProbe of %s", b, first.ContainerID)
	}
	n.waitEvent(uid, schemas.EventContainerStarted, 60*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ContainerID != first.ContainerID && ev.Attempt == 1
	})
	n.waitStatus(uid, 60*time.Second, "restarted once", func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].RestartCount >= 1
	})
	// The second instance fails too: killed again, then backed off.
	backoff := n.waitEvent(uid, schemas.EventBackOff, 90*time.Second, nil)
	t.Logf("BackOff: %s", backoff.Message)
	if kills := n.events(uid, schemas.EventContainerKilled); len(kills) < 2 {
		t.Errorf("%d ContainerKilled events before the back-off, want 2", len(kills))
	}
}
