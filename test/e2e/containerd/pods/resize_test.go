package containerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// resizableJSON is revision rev of a long-running pod limited to memory
// (and 200m of cpu), on the host network.
func (s *suite) resizableJSON(uid string, rev int64, memory string) string {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", untilTerm})
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Always","hostNetwork":true,"terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":"IfNotPresent","command":%s,
	        "resources":{"requests":{"cpu":"50m","memory":"32Mi"},"limits":{"cpu":"200m","memory":%q}}}]}}}`,
		rev, uid, uid, runLabel, s.runID, s.env.image, cmd, memory)
}

// On containerd, through the CRI: a new memory limit for a running
// container is applied with UpdateContainerResources (the same container,
// restart count 0, the cgroup's limit raised), and ContainerStatus reports
// the resources read back, which the pod's status shows.
func TestResizeInPlaceOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("resize")
	if r := n.waitResult(uid, n.publish(uid, s.resizableJSON(uid, 1, "64Mi")), 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	st := n.waitStatus(uid, 60*time.Second, "Running", running)
	id := st.Containers[0].ContainerID
	limit := func() string {
		resp, err := s.cri.ContainerStatus(context.Background(), id, true)
		if err != nil {
			t.Fatal(err)
		}
		return jetlettest.ContainerCgroupFile(t, resp, "memory", "memory.limit_in_bytes", "memory.max")
	}
	if got := limit(); got != strconv.Itoa(64<<20) {
		t.Fatalf("memory limit at start = %s", got)
	}

	r := n.waitResult(uid, n.publish(uid, s.resizableJSON(uid, 2, "128Mi")), 60*time.Second)
	if r.Outcome != schemas.OutcomeSynced || !slices.ContainsFunc(r.Actions, func(a schemas.ActionResult) bool {
		return a.Action == schemas.ActionUpdateContainerResources
	}) {
		t.Fatalf("resize: %s %q %+v; want Synced with UpdateContainerResources", r.Outcome, r.Error, r.Actions)
	}
	poll.Until(t, 30*time.Second, poll.Msg("the cgroup's memory limit raised to 128Mi"), func() bool { return limit() == strconv.Itoa(128<<20) })
	st = n.waitStatus(uid, 30*time.Second, "revision 2 with the new limit applied", func(st *schemas.PodStatus) bool {
		c := st.Containers[0]
		return st.Revision == 2 && c.Resources != nil && c.Resources.Limits.Memory().Value() == 128<<20
	})
	if c := st.Containers[0]; c.ContainerID != id || c.RestartCount != 0 {
		t.Errorf("after the resize: %s, restart count %d; want %s, 0", c.ContainerID, c.RestartCount, id)
	}
}
