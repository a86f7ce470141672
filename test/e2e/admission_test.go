package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/schemas"
)

// editPod is body, an apply intent, with its pod changed by edit.
func editPod(t testing.TB, body string, edit func(*corev1.Pod)) string {
	t.Helper()
	var in schemas.PodIntent
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	edit(in.Pod)
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// requesting is a long-running pod whose one container requests memory.
func requesting(t testing.TB, uid, memory string) string {
	return editPod(t, podJSON(uid, 1, "Always", "exec sleep 3600"), func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
	})
}

// assertRefused checks that the pod's intent was Rejected with reason at
// admission, its status says Failed with that reason, and nothing of it
// started.
func assertRefused(t *testing.T, n *node, uid, reason, inMessage string) {
	t.Helper()
	r := n.results(uid, 1)[0]
	if r.Outcome != schemas.OutcomeRejected || r.Reason != reason || !strings.Contains(r.Error, inMessage) {
		t.Fatalf("%s: outcome %s, reason %q, error %q; want Rejected, %s, an error with %q", uid, r.Outcome, r.Reason, r.Error, reason, inMessage)
	}
	if len(r.Actions) != 0 {
		t.Errorf("%s: a refused pod had actions: %+v", uid, r.Actions)
	}
	st := n.waitStatus(uid, 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseFailed })
	if st.Reason != reason || st.Message != r.Error || st.Sandbox != nil {
		t.Errorf("%s: status %+v; want Failed, reason %s, the result's error, no sandbox", uid, st, reason)
	}
	n.waitEvent(uid, schemas.EventIntentRejected, 30*time.Second, func(ev schemas.LifecycleEvent) bool { return ev.Reason == reason })
	if started := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event."+n.name+"."+uid+".SandboxCreated"); len(started) != 0 {
		t.Errorf("%s: a refused pod got a sandbox: %+v", uid, started)
	}
}

// The node admits by kubelet's rules through `jetlet run`: a pod asking
// more memory than the node has is OutOfmemory, the fourth pod of
// --max-pods 3 is OutOfpods, a nodeSelector the node's labels do not match
// is NodeAffinity; each is Failed with that reason and never started.
func TestAdmissionRefusesWhatDoesNotFit(t *testing.T) {
	t.Parallel()
	n := startNode(t, shortDir(t), "", "--max-pods", "3", "--node-labels", "disk=ssd")
	n.publish("huge", requesting(t, "huge", "64Ti"))
	assertRefused(t, n, "huge", "OutOfmemory", "Node didn't have enough resource: memory")

	n.publish("picky", editPod(t, podJSON("picky", 1, "Always", "exec sleep 3600"), func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"disk": "hdd"}
	}))
	assertRefused(t, n, "picky", "NodeAffinity", "disk")

	for i := range 3 {
		uid := fmt.Sprintf("fits-%d", i)
		n.publish(uid, podJSON(uid, 1, "Always", "exec sleep 3600"))
		if r := n.results(uid, 1)[0]; r.Outcome != schemas.OutcomeSynced {
			t.Fatalf("%s: %s %s", uid, r.Outcome, r.Error)
		}
	}
	n.publish("fourth", podJSON("fourth", 1, "Always", "exec sleep 3600"))
	assertRefused(t, n, "fourth", "OutOfpods", "pods, requested: 1, used: 3, capacity: 3")

	// A refused pod holds nothing: once one that fits is deleted, the same
	// UID applied again is admitted.
	n.publish("fits-0", deleteJSON("fits-0", 2, 0))
	n.waitStatus("fits-0", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseTerminated })
	n.publish("fourth", podJSON("fourth", 2, "Always", "exec sleep 3600"))
	if r := n.results("fourth", 2)[1]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("fourth, again after a pod left: %s %s", r.Outcome, r.Error)
	}
}

// Two schedulers racing for the node's last memory: the node says yes to
// one and no to the other, never yes to both.
func TestAdmissionRaceForTheLastMemoryHasOneWinner(t *testing.T) {
	// Allocatable memory is the machine's less what is reserved; each pod
	// asks for more than half of it.
	n := startNode(t, shortDir(t), "")
	allocatable := nodeAllocatable(t, n, corev1.ResourceMemory)
	half := resource.NewQuantity(allocatable.Value()/2+1<<20, resource.BinarySI).String()
	var wg sync.WaitGroup
	for _, uid := range []string{"racer-a", "racer-b"} {
		wg.Go(func() { n.publish(uid, requesting(t, uid, half)) })
	}
	wg.Wait()
	outcomes := map[schemas.Outcome]int{}
	for _, uid := range []string{"racer-a", "racer-b"} {
		r := n.results(uid, 1)[0]
		outcomes[r.Outcome]++
		if r.Outcome == schemas.OutcomeRejected && r.Reason != "OutOfmemory" {
			t.Errorf("%s: refused for %s (%s), want OutOfmemory", uid, r.Reason, r.Error)
		}
	}
	if outcomes[schemas.OutcomeSynced] != 1 || outcomes[schemas.OutcomeRejected] != 1 {
		t.Fatalf("outcomes %v: want one Synced and one Rejected", outcomes)
	}
}

// nodeAllocatable reads the node record's allocatable of a resource, once
// the heartbeat has stored the record.
func nodeAllocatable(t *testing.T, n *node, name corev1.ResourceName) resource.Quantity {
	t.Helper()
	rec := n.waitRecord(t, 30*time.Second, func(schemas.NodeRecord) bool { return true })
	q, ok := rec.Allocatable[name]
	if !ok {
		t.Fatalf("node record: no allocatable %s in %v", name, rec.Allocatable)
	}
	return q
}

// The pod of the issue: host PID namespace, every capability, the host's
// root mounted. At the default level (baseline) it is refused, each
// violation named; at --pod-security privileged it runs.
func TestPodSecurityAtTheNode(t *testing.T) {
	hostile := func(uid string) string {
		return editPod(t, podJSON(uid, 1, "Always", "exec sleep 3600"), func(p *corev1.Pod) {
			p.Spec.HostPID = true
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"ALL"}}}
			p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
		})
	}
	t.Run("baseline", func(t *testing.T) {
		n := startNode(t, shortDir(t), "")
		n.publish("hostile", hostile("hostile"))
		assertRefused(t, n, "hostile", "PodSecurity", `violates PodSecurity "baseline:latest": `)
		r := n.results("hostile", 1)[0]
		for _, want := range []string{`host namespaces (hostPID=true)`, `hostPath volumes (volume "host")`, `non-default capabilities (container "app" must not include "ALL" in securityContext.capabilities.add)`} {
			if !strings.Contains(r.Error, want) {
				t.Errorf("error %q does not name %s", r.Error, want)
			}
		}
		// Deleted, it is Terminated, as a deleted pod: `jetlet get pods`
		// lists it no more (it showed PodSecurity after the delete).
		n.publish("hostile", deleteJSON("hostile", 2, 0))
		if r := n.results("hostile", 2)[1]; r.Outcome != schemas.OutcomeSynced {
			t.Fatalf("delete: %s %s", r.Outcome, r.Error)
		}
		n.waitStatus("hostile", 30*time.Second, func(st *schemas.PodStatus) bool {
			return st.Phase == schemas.PhaseTerminated && st.Revision == 2
		})
	})
	t.Run("privileged", func(t *testing.T) {
		n := startNode(t, shortDir(t), "", "--pod-security", "privileged")
		n.publish("hostile", hostile("hostile"))
		if r := n.results("hostile", 1)[0]; r.Outcome != schemas.OutcomeSynced {
			t.Fatalf("at privileged: %s %s", r.Outcome, r.Error)
		}
		n.waitEvent("hostile", schemas.EventContainerStarted, 60*time.Second, nil)
	})
}
