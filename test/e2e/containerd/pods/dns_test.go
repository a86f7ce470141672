package containerd_test

import (
	"testing"
	"time"
)

// On containerd, through the CRI: the hosts file jetlet mounts (the node's,
// on its network, with the pod's hostAliases after it) and the sandbox's DNS
// config (dnsPolicy None: dnsConfig alone), as the container reads them.
func TestHostAliasesAndDNSConfigOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	uid := s.uid("dns")
	script := `echo "alias: $(grep foo.local /etc/hosts)"; echo "dns: $(grep -v '^#' /etc/resolv.conf | tr '\n' ' ')"; ` + untilTerm
	st := n.applyRunning(uid, withPodSpec(t, s.podJSON(uid, 1, "Always", script), map[string]any{
		"hostAliases": []any{map[string]any{"ip": "10.1.2.3", "hostnames": []any{"foo.local", "bar.local"}}},
		"dnsPolicy":   "None",
		"dnsConfig":   map[string]any{"nameservers": []any{"10.96.0.10"}, "searches": []any{"a.example"}},
	}))
	s.waitLog(st.Containers[0].ContainerID, "alias: 10.1.2.3\tfoo.local\tbar.local", 30*time.Second)
	s.waitLog(st.Containers[0].ContainerID, "nameserver 10.96.0.10 ", 30*time.Second)
	s.waitLog(st.Containers[0].ContainerID, "search a.example ", 30*time.Second)
}
