package client

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/schemas"
)

// TestNodeLifecycle: a live node is Ready; one whose heartbeat is late, or
// expired while it has pods, is Unknown; one that stopped cleanly is
// Stopped. The pods of a node whose heartbeat is not fresh show as Unknown unless they
// are finished, and their stored status is left as it is. node remove
// refuses a live node and removes a retired one's statuses and record.
func TestNodeLifecycle(t *testing.T) {
	c := newCluster(t)
	kv, err := c.js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	c.heartbeat("live")
	c.putNode(schemas.NodeRecord{APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: "late",
		StartedAt: time.Now().Add(-time.Hour), HeartbeatAt: time.Now().Add(-5 * status.HeartbeatPeriod)})
	c.heartbeat("stopped")
	if err := kv.Delete(t.Context(), "stopped"); err != nil { // as a clean stop does
		t.Fatal(err)
	}
	running := []schemas.ContainerStatus{{Name: "app", State: schemas.ContainerRunning, Ready: true}}
	for _, st := range []schemas.PodStatus{
		{UID: "u1", Namespace: "default", Name: "a", Node: "live", Phase: schemas.PhaseRunning, Containers: running},
		{UID: "u2", Namespace: "default", Name: "b", Node: "late", Phase: schemas.PhaseRunning, Containers: running},
		{UID: "u3", Namespace: "default", Name: "c", Node: "stopped", Phase: schemas.PhaseRunning, Containers: running},
		{UID: "u4", Namespace: "default", Name: "d", Node: "lost", Phase: schemas.PhasePending},
		{UID: "u5", Namespace: "default", Name: "e", Node: "lost", Phase: schemas.PhaseSucceeded},
		// Deleted: not counted, and no reason to list a node of its own.
		{UID: "u6", Namespace: "default", Name: "f", Node: "stopped", Phase: schemas.PhaseTerminated},
		{UID: "u7", Namespace: "default", Name: "g", Node: "gone", Phase: schemas.PhaseTerminated},
	} {
		st.ObservedAt = time.Now()
		c.putStatus(st)
	}

	res := c.run("get", "nodes")
	wantCode(t, res, 0)
	for _, want := range []string{
		`late\s+Unknown\s+<none>\s+<none>\s+0\s+<none>\s+<none>\s+60m\s+<none>\s+\d+s ago`,
		`live\s+Ready\s+<none>\s+<none>\s+0\s+<none>\s+fake 0.1\s+60m\s+test\s+\d+s ago`,
		`lost\s+Unknown\s+<none>\s+<none>\s+2\s.*\sexpired`,
		`stopped\s+Stopped\s+<none>\s+<none>\s+1\s.*\sdeleted \d+s ago`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get nodes does not match %s", want)
		}
	}
	if strings.Contains(res.stdout, "gone") {
		t.Errorf("get nodes lists a node whose only pod was deleted:\n%s", res.stdout)
	}
	res = c.run("get", "pods")
	wantCode(t, res, 0)
	for _, want := range []string{`a\s+1/1\s+Running\s`, `b\s+1/1\s+Unknown\s`, `c\s+1/1\s+Unknown\s`, `d\s+0/0\s+Unknown\s`, `e\s+0/0\s+Succeeded\s`} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get pods does not match %s", want)
		}
	}
	res = c.run("get", "pods", "--node", "late", "-o", "json")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, `"phase": "Running"`)

	wantCode(t, c.run("node", "remove", "live"), 1)
	res = c.run("node", "remove", "lost")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "node lost removed: 2 status keys")
	res = c.run("node", "remove", "stopped")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "node stopped removed: 2 status keys, node record") // c's and deleted f's
	res = c.run("get", "nodes")
	if strings.Contains(res.stdout, "lost") || strings.Contains(res.stdout, "stopped") {
		t.Errorf("removed nodes still listed:\n%s", res.stdout)
	}
	res = c.run("get", "pods")
	if regexp.MustCompile(`\s[cde]\s`).MatchString(res.stdout) {
		t.Errorf("the removed nodes' pods are still listed:\n%s", res.stdout)
	}
	wantContains(t, "stderr", c.run("node", "remove", "lost").stderr, "node lost not found")
}

// putNode stores rec in jetlet_nodes, as its jetlet's heartbeat does.
func (c *cluster) putNode(rec schemas.NodeRecord) {
	c.t.Helper()
	kv, err := c.js.KeyValue(c.t.Context(), schemas.BucketNodes)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := kv.Put(c.t.Context(), rec.Node, mustJSON(c.t, rec)); err != nil {
		c.t.Fatal(err)
	}
}

// nodeStatusRecord is a live node's record with the node status of
// docs/contract.md section 12: 2 CPUs and 1Gi allocatable, 3 pods admitted, memory
// pressure, a taint, the embedded runtime's isolation and one image.
func nodeStatusRecord(name string) schemas.NodeRecord {
	now := time.Now().UTC()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, message string) schemas.NodeCondition {
		return schemas.NodeCondition{Type: t, Status: s, Reason: reason, Message: message, LastTransitionTime: now.Add(-time.Hour)}
	}
	return schemas.NodeRecord{
		APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: name,
		JetletVersion: "test", RuntimeName: "fake", RuntimeVersion: "0.1", RuntimeAPIVersion: "v1",
		RuntimeEndpoint: "unix:///run/fake.sock", Isolation: schemas.IsolationFull,
		Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")},
		Allocated: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
			corev1.ResourcePods: resource.MustParse("3")},
		Conditions: []schemas.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "jetlet is posting ready status"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, "KubeletHasInsufficientMemory", "available memory is below the eviction threshold"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeHostName, Address: name}},
		Images:    []corev1.ContainerImage{{Names: []string{"docker.io/library/busybox:1.36"}, SizeBytes: 4261550}},
		Pods:      schemas.PodCounts{Total: 3, ByPhase: map[schemas.PodPhase]int{schemas.PhaseRunning: 3}},
		StartedAt: now.Add(-time.Hour), HeartbeatAt: now,
	}
}

// TestGetNodesShowsNodeStatus: get nodes shows what a node's admitted pods
// request out of its allocatable, its pressures, NotReady for a node that
// says so, Unknown for one whose heartbeat is late, and SchedulingDisabled
// for a cordoned one; -o json prints the records as stored.
func TestGetNodesShowsNodeStatus(t *testing.T) {
	c := newCluster(t)
	c.putNode(nodeStatusRecord("pressed"))

	cordoned := nodeStatusRecord("cordoned")
	cordoned.Unschedulable, cordoned.Allocated, cordoned.Conditions = true, nil, cordoned.Conditions[:1]
	c.putNode(cordoned)

	notReady := nodeStatusRecord("notready")
	notReady.Conditions = []schemas.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}}
	c.putNode(notReady)

	late := nodeStatusRecord("late")
	late.Unschedulable, late.HeartbeatAt = true, time.Now().Add(-5*status.HeartbeatPeriod)
	c.putNode(late)

	res := c.run("get", "nodes")
	wantCode(t, res, 0)
	for _, want := range []string{
		`(?m)^NAME\s+STATUS\s+CPU\s+MEMORY\s+PODS\s+PRESSURE\s+RUNTIME\s+AGE\s+VERSION\s+HEARTBEAT$`,
		`(?m)^pressed\s+Ready\s+250m/2\s+512Mi/1Gi\s+3/110\s+MemoryPressure\s+fake 0.1\s+60m\s+test\s+\d+s ago$`,
		`(?m)^cordoned\s+Ready,SchedulingDisabled\s+0/2\s+0/1Gi\s+0/110\s+<none>\s+fake 0.1\s`,
		`(?m)^notready\s+NotReady\s+250m/2\s`,
		`(?m)^late\s+Unknown,SchedulingDisabled\s+250m/2\s`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get nodes does not match %s", want)
		}
	}

	withFeatures := nodeStatusRecord("userns")
	withFeatures.DeclaredFeatures = []string{"UserNamespacesSupport"}
	c.putNode(withFeatures)
	res = c.run("get", "nodes", "-o", "wide")
	wantCode(t, res, 0)
	for _, want := range []string{
		`(?m)^NAME\s+STATUS\s+.*\s+HEARTBEAT\s+DECLARED-FEATURES$`,
		`(?m)^userns\s+Ready\s+.*\s+UserNamespacesSupport$`,
		`(?m)^pressed\s+Ready\s+.*\s+<none>$`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get nodes -o wide does not match %s:\n%s", want, res.stdout)
		}
	}

	res = c.run("get", "nodes", "--node", "pressed", "-o", "json")
	wantCode(t, res, 0)
	var l list[schemas.NodeRecord]
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("-o json --node pressed: %d records, want 1", len(l.Items))
	}
	got := l.Items[0]
	if cpu := got.Allocatable[corev1.ResourceCPU]; cpu.String() != "2" || len(got.Conditions) != 4 || got.Taints[0].Key != "dedicated" || got.Images[0].SizeBytes != 4261550 {
		t.Errorf("-o json does not print the record as stored: %+v", got)
	}
}
