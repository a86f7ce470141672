package client

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// podWithResources is a pod whose containers request and limit CPU and
// memory: web asks 250m and 64Mi, limited to 500m and 128Mi; db's two
// containers ask 100m and 150m with memory limited to 256Mi (which is then
// its request too).
func podWithResources(name string) string {
	switch name {
	case "web":
		return `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: busybox:1.36
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 500m, memory: 128Mi}
`
	case "db":
		return `apiVersion: v1
kind: Pod
metadata:
  name: db
spec:
  containers:
  - name: server
    image: busybox:1.36
    resources:
      requests: {cpu: 100m}
      limits: {memory: 256Mi}
  - name: backup
    image: busybox:1.36
    resources:
      requests: {cpu: 150m}
`
	}
	panic("no pod " + name)
}

// TestDescribeNode: describe node shows the node's record as kubectl
// describe node does, its non-terminated pods with their requests and
// limits (from their intents) as shares of allocatable, the totals, its
// images and its pods' newest events. A node without a record shows its
// pods; an unknown one is not found.
func TestDescribeNode(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	c.putNode(nodeStatusRecord("n1")) // after startNode's own heartbeat
	for _, name := range []string{"web", "db"} {
		wantCode(t, c.runIn(podWithResources(name), "apply", "-f", "-", "--node", "n1", "--wait"), 0)
	}
	now := time.Now().UTC()
	for _, st := range []schemas.PodStatus{
		// Refused at admission: terminal, not listed.
		{UID: "u-oom", Namespace: "default", Name: "big", Node: "n1", Phase: schemas.PhaseFailed, Reason: "OutOfmemory",
			Message: "Node didn't have enough resource: memory, requested: 4294967296, used: 536870912, capacity: 1073741824"},
		{UID: "u-done", Namespace: "default", Name: "job", Node: "n1", Phase: schemas.PhaseSucceeded},
		// No intent kept: its resources are not known.
		{UID: "u-orphan", Namespace: "kube-system", Name: "orphan", Node: "n1", Phase: schemas.PhaseRunning},
		{UID: "u-other", Namespace: "default", Name: "elsewhere", Node: "n2", Phase: schemas.PhaseRunning},
		{UID: "u-lost", Namespace: "default", Name: "stranded", Node: "lost", Phase: schemas.PhaseRunning},
	} {
		st.ObservedAt = now
		c.putStatus(st)
	}

	consumersBefore := c.consumers()
	res := c.run("describe", "node", "n1")
	wantCode(t, res, 0)
	for _, want := range []string{
		`(?m)^Name:\s+n1$`, `(?m)^Status:\s+Ready$`, `(?m)^Heartbeat:\s+\d+s ago$`,
		`(?m)^Labels:\s+kubernetes.io/arch=amd64\n\s+kubernetes.io/hostname=n1\n\s+kubernetes.io/os=linux$`,
		`(?m)^Taints:\s+dedicated=gpu:NoSchedule$`, `(?m)^Unschedulable:\s+false$`,
		`(?m)^Conditions:\n  TYPE\s+STATUS\s+LAST TRANSITION\s+REASON\s+MESSAGE$`,
		`(?m)^  Ready\s+True\s+\S+\s+KubeletReady\s+jetlet is posting ready status$`,
		`(?m)^  MemoryPressure\s+True\s+\S+\s+KubeletHasInsufficientMemory\s+available memory is below the eviction threshold$`,
		`(?m)^Addresses:\n  InternalIP:\s+10.0.0.5\n  Hostname:\s+n1$`,
		`(?m)^Capacity:\n  cpu:\s+2\n  ephemeral-storage:\s+20Gi\n  memory:\s+2Gi\n  pods:\s+110$`,
		`(?m)^Allocatable:\n  cpu:\s+2\n  ephemeral-storage:\s+10Gi\n  memory:\s+1Gi\n  pods:\s+110$`,
		`(?m)^  Container Runtime Version:\s+fake://0.1$`, `(?m)^  Runtime API Version:\s+v1$`,
		`(?m)^  Jetlet Version:\s+test$`, `(?m)^  Isolation:\s+full$`,
		`(?m)^Non-terminated Pods: \(3 in total\)$`,
		`(?m)^  NAMESPACE\s+NAME\s+CPU REQUESTS\s+CPU LIMITS\s+MEMORY REQUESTS\s+MEMORY LIMITS\s+AGE$`,
		`(?m)^  default\s+db\s+250m \(12%\)\s+0 \(0%\)\s+256Mi \(25%\)\s+256Mi \(25%\)\s+\d+s$`,
		`(?m)^  default\s+web\s+250m \(12%\)\s+500m \(25%\)\s+64Mi \(6%\)\s+128Mi \(12%\)\s+\d+s$`,
		`(?m)^  kube-system\s+orphan\s+<unknown>\s+<unknown>\s+<unknown>\s+<unknown>\s+\S+$`,
		`(?m)^  cpu\s+500m \(25%\)\s+500m \(25%\)$`,
		`(?m)^  memory\s+320Mi \(31%\)\s+384Mi \(37%\)$`,
		`(?m)^  ephemeral-storage\s+0 \(0%\)\s+0 \(0%\)$`,
		`(?m)^Images:\n  NAMES\s+SIZE\n  docker.io/library/busybox:1.36\s+4.3MB$`,
		`(?m)^  \S+\s+default/web\s+ContainerStarted\s+app\s`,
		`(?m)^  \S+\s+default/db\s+SandboxCreated\s`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("describe node does not match %s", want)
		}
	}
	for _, absent := range []string{"big", "job", "elsewhere", "stranded"} {
		if strings.Contains(res.stdout, absent) {
			t.Errorf("describe node n1 shows %s", absent)
		}
	}
	// The newest of each pod and type: db's two ContainerStarted are one.
	if n := len(regexp.MustCompile(`default/db\s+ContainerStarted`).FindAllString(res.stdout, -1)); n != 1 {
		t.Errorf("%d ContainerStarted events of db, want its newest only", n)
	}

	res = c.run("describe", "node", "lost")
	wantCode(t, res, 0)
	for _, want := range []string{
		`(?m)^Status:\s+Unknown$`, `(?m)^Heartbeat:\s+expired$`, `(?m)^Record:\s+none in jetlet_nodes`,
		`(?m)^  default\s+stranded\s+<unknown>`, `(?m)^Events:\n  <none>$`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("describe node lost does not match %s", want)
		}
	}

	res = c.run("describe", "node", "nothere")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "node nothere not found")

	// Its reads of intents, events and buckets leave no consumer behind
	// (the server's own clean-up after 10s idle is not waited for).
	var after []string
	poll.Until(t, 5*time.Second, func() string {
		return fmt.Sprintf("after describe node the server has consumers %v; before it %v", after, consumersBefore)
	}, func() bool { after = c.consumers(); return slices.Equal(after, consumersBefore) })
}

// get pods shows an admission refusal's reason as the pod's STATUS, and
// describe pod its reason and message.
func TestAdmissionRefusalShown(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")
	const message = "Node didn't have enough resource: memory, requested: 4294967296, used: 536870912, capacity: 1073741824"
	c.putStatus(schemas.PodStatus{UID: "u-oom", Namespace: "default", Name: "big", Node: "n1", Phase: schemas.PhaseFailed,
		Reason: "OutOfmemory", Message: message, ObservedAt: time.Now().UTC()})

	res := c.run("get", "pods")
	wantCode(t, res, 0)
	if !regexp.MustCompile(`(?m)^default\s+big\s+0/0\s+OutOfmemory\s+0\s`).MatchString(res.stdout) {
		t.Errorf("get pods does not show the refusal's reason:\n%s", res.stdout)
	}
	res = c.run("describe", "pod", "default/big")
	wantCode(t, res, 0)
	for _, want := range []string{`(?m)^Status:\s+OutOfmemory$`, `(?m)^Phase:\s+Failed$`, `(?m)^Reason:\s+OutOfmemory$`, `(?m)^Message:\s+` + regexp.QuoteMeta(message) + `$`} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("describe pod does not match %s", want)
		}
	}
}
