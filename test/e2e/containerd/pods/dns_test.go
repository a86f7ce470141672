package containerd_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// On containerd, through the CRI: the hosts file jetlet mounts (the node's,
// on its network, with the pod's hostAliases after it) and the sandbox's DNS
// config (dnsPolicy None: dnsConfig alone), as the container reads them.
func TestHostAliasesAndDNSConfigOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("dns")
	script := `echo "alias: $(grep foo.local /etc/hosts)"; echo "dns: $(grep -v '^#' /etc/resolv.conf | tr '\n' ' ')"; ` + untilTerm
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	body := fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":"Always","hostNetwork":true,"terminationGracePeriodSeconds":5,
	      "hostAliases":[{"ip":"10.1.2.3","hostnames":["foo.local","bar.local"]}],
	      "dnsPolicy":"None","dnsConfig":{"nameservers":["10.96.0.10"],"searches":["a.example"]},
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":"IfNotPresent","command":%s}]}}}`,
		uid, uid, runLabel, s.runID, s.env.image, cmd)
	seq := n.publish(uid, body)
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	st := n.waitStatus(uid, 60*time.Second, "Running", running)
	s.waitLog(st.Containers[0].ContainerID, "alias: 10.1.2.3\tfoo.local\tbar.local", 30*time.Second)
	s.waitLog(st.Containers[0].ContainerID, "nameserver 10.96.0.10 ", 30*time.Second)
	s.waitLog(st.Containers[0].ContainerID, "search a.example ", 30*time.Second)
}
