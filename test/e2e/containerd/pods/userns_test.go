package containerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// A pod with hostUsers false runs in a user namespace of its own where the
// runtime's default handler says it can (containerd 2 with runc 1.2 or
// later on Linux 6.3 or later): its root is not the host's. Elsewhere
// jetlet refuses it, naming the field, and creates nothing: containerd 1.6
// ignores the field, and containerd 2 over runc 1.1 cannot idmap, so either
// would run the pod as the host's root.
func TestHostUsersFalseOnContainerd(t *testing.T) {
	s := newSuite(t)
	st, err := s.cri.Status(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	supported := false
	for _, h := range st.GetRuntimeHandlers() {
		if h.GetName() == "" {
			supported = h.GetFeatures().GetUserNamespaces()
		}
	}
	n := s.startNode()
	uid := s.uid("userns")
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", untilTerm})
	body := fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Always","hostUsers":false,"terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":"IfNotPresent","command":%s}]}}}`,
		uid, uid, runLabel, s.runID, s.env.image, cmd)
	seq := n.publish(uid, body)
	r := n.waitResult(uid, seq, 60*time.Second)
	if !supported {
		t.Logf("the runtime's default handler reports no user namespaces (runtime handlers %v)", st.GetRuntimeHandlers())
		if r.Outcome != schemas.OutcomeRejected || !strings.Contains(r.Error, "pod.spec.hostUsers") {
			t.Fatalf("apply: %s %q, want Rejected naming pod.spec.hostUsers", r.Outcome, r.Error)
		}
		if sbs := s.podSandboxes(uid); len(sbs) != 0 {
			t.Errorf("a rejected pod has sandboxes %v", sbs)
		}
		return
	}
	if r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	ps := n.waitStatus(uid, 60*time.Second, "Running", running)
	out, err := s.cri.ExecSync(context.Background(), ps.Containers[0].ContainerID, []string{"cat", "/proc/self/uid_map"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(out.GetStdout())); len(f) != 3 || f[0] != "0" || f[1] == "0" || f[2] != "65536" {
		t.Errorf("the container's uid_map is %q, want 65536 ids from 0 mapped away from the host's root", out.GetStdout())
	}
}
