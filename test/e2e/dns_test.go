package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// Through `jetlet run` on the embedded runtime, as the container reads
// them: /etc/hosts with the pod's fully qualified name and its hostAliases,
// /etc/resolv.conf from --cluster-dns, --cluster-domain and dnsConfig, and
// the hostname set as the FQDN.
func TestThePodsHostsFileAndDNS(t *testing.T) {
	requireRoot(t)
	n := startNode(t, shortDir(t), "", append(mountsTheHost, "--cluster-dns", "10.96.0.10", "--cluster-domain", "example.test")...)
	shared := t.TempDir()
	vol, mount := sharedVolume(shared)
	script := `{ cat /etc/hosts; echo ---; cat /etc/resolv.conf; echo ---; hostname; } > /shared/seen.tmp; mv /shared/seen.tmp /shared/seen`
	n.publish("named", podWithSpec("named", vol+`,"restartPolicy":"Never",
	  "hostname":"web","subdomain":"db","setHostnameAsFQDN":true,
	  "hostAliases":[{"ip":"10.1.2.3","hostnames":["foo.local","bar.local"]}],
	  "dnsConfig":{"searches":["extra.example"],"options":[{"name":"edns0"},{"name":"ndots","value":"2"}]},
	  "containers":[{"name":"app","image":"busybox:1.36",`+mount+`,"command":`+shellCmd(script)+`}]`))
	seen := strings.Split(waitFile(t, filepath.Join(shared, "seen")), "---\n")
	if len(seen) != 3 {
		t.Fatalf("the container saw %q", seen)
	}
	hosts, resolv, hostname := seen[0], seen[1], strings.TrimSpace(seen[2])
	for _, want := range []string{"# Kubernetes-managed hosts file.\n", "\tweb.db.default.svc.example.test\tweb\n", "# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
		}
	}
	for _, want := range []string{"nameserver 10.96.0.10\n", "search default.svc.example.test svc.example.test example.test ", " extra.example\n", "options ndots:2 edns0\n"} {
		if !strings.Contains(resolv, want) {
			t.Errorf("/etc/resolv.conf lacks %q:\n%s", want, resolv)
		}
	}
	if hostname != "web.db.default.svc.example.test" {
		t.Errorf("hostname %q, want the FQDN", hostname)
	}
}
