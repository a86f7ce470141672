package reconcile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// nodeResolvConf is the node's resolver file of the DNS tests: comments, two
// search lines (the last wins, its trailing dot and "." dropped), options
// repeated (the later wins).
const nodeResolvConf = `# written by the node's network manager
nameserver 192.0.2.53
; another comment
nameserver 192.0.2.54
search old.example
search corp.example. .
options ndots:2 timeout:1
options ndots:3
`

// dnsManager is a manager whose node's resolver file is nodeResolvConf and
// whose cluster is cfg's.
func dnsManager(t *testing.T, cfg Config) (*Kuberuntime, *eventLog) {
	t.Helper()
	cfg.ResolvConf = filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(cfg.ResolvConf, []byte(nodeResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.NodeName, cfg.DataDir = "n1", t.TempDir()
	events := &eventLog{}
	m, err := New(fakecri.New(), events, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, events
}

// The sandbox's DNS config and hostname, as kubelet's GetPodDNS and
// GeneratePodHostNameAndDomain make them, row by row.
func TestPodDNSConfig(t *testing.T) {
	cluster := Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "example.test"}
	node := &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"corp.example"}, Options: []string{"ndots:3", "timeout:1"}}
	many := func(n int, f func(i int) string) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = f(i)
		}
		return s
	}
	for _, tt := range []struct {
		name     string
		cfg      Config
		spec     func(*corev1.PodSpec)
		want     *runtimeapi.DNSConfig
		warnings []schemas.EventType
		warning  string // in the first warning's message
	}{{
		name: "ClusterFirst: the cluster's nameservers and searches, then the node's searches, ndots 5",
		cfg:  cluster,
		spec: func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSClusterFirst },
		want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.example.test", "svc.example.test", "example.test", "corp.example"}, Options: []string{"ndots:5"}},
	}, {
		name:     "ClusterFirst without a cluster DNS: the node's, and a MissingClusterDNS warning",
		spec:     func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSClusterFirst },
		want:     node,
		warnings: []schemas.EventType{schemas.EventMissingClusterDNS},
		warning:  `cannot create Pod using "ClusterFirst" policy`,
	}, {
		name: "ClusterFirst on the node's network: the node's, no warning",
		cfg:  cluster,
		spec: func(s *corev1.PodSpec) { s.DNSPolicy, s.HostNetwork = corev1.DNSClusterFirst, true },
		want: node,
	}, {
		name: "ClusterFirstWithHostNet on the node's network: the cluster's",
		cfg:  cluster,
		spec: func(s *corev1.PodSpec) { s.DNSPolicy, s.HostNetwork = corev1.DNSClusterFirstWithHostNet, true },
		want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.example.test", "svc.example.test", "example.test", "corp.example"}, Options: []string{"ndots:5"}},
	}, {
		name: "Default: the node's",
		cfg:  cluster,
		spec: func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSDefault },
		want: node,
	}, {
		name: "None: dnsConfig alone",
		cfg:  cluster,
		spec: func(s *corev1.PodSpec) {
			s.DNSPolicy = corev1.DNSNone
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "edns0"}}}
		},
		want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"edns0"}},
	}, {
		name: "dnsConfig adds to the policy's: duplicates dropped, an option of the same name replaced in place",
		cfg:  cluster,
		spec: func(s *corev1.PodSpec) {
			s.DNSPolicy = corev1.DNSClusterFirst
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"}, Searches: []string{"svc.example.test", "extra.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("1")}, {Name: "single-request"}}}
		},
		want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "1.1.1.1"}, Searches: []string{"ns.svc.example.test", "svc.example.test", "example.test", "corp.example", "extra.example"}, Options: []string{"ndots:1", "single-request"}},
	}, {
		name: "more than 3 nameservers: the first 3, and a DNSConfigForming warning",
		spec: func(s *corev1.PodSpec) {
			s.DNSPolicy = corev1.DNSDefault
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8"}}
		},
		want:     &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53", "192.0.2.54", "1.1.1.1"}, Searches: []string{"corp.example"}, Options: []string{"ndots:3", "timeout:1"}},
		warnings: []schemas.EventType{schemas.EventDNSConfigForming},
		warning:  "the applied nameserver line is: 192.0.2.53 192.0.2.54 1.1.1.1",
	}, {
		name: "more than 32 search paths: the first 32, and a DNSConfigForming warning",
		spec: func(s *corev1.PodSpec) {
			s.DNSPolicy = corev1.DNSNone
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: many(31, func(i int) string { return string(rune('a'+i%26)) + strings.Repeat("x", i) + ".example" })}
			s.DNSConfig.Searches = append([]string{"z1.example", "z2.example"}, s.DNSConfig.Searches...)
		},
		want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: append([]string{"z1.example", "z2.example"},
			many(30, func(i int) string { return string(rune('a'+i%26)) + strings.Repeat("x", i) + ".example" })...)},
		warnings: []schemas.EventType{schemas.EventDNSConfigForming},
		warning:  "Search Line limits were exceeded",
	}, {
		name: "a search line over 2048 characters: cut from the end",
		spec: func(s *corev1.PodSpec) {
			s.DNSPolicy = corev1.DNSNone
			s.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: many(10, func(i int) string { return strings.Repeat(string(rune('a'+i)), 250) })}
		},
		want:     &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: many(8, func(i int) string { return strings.Repeat(string(rune('a'+i)), 250) })},
		warnings: []schemas.EventType{schemas.EventDNSConfigForming},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := dnsManager(t, tt.cfg)
			pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
			tt.spec(&pod.Spec)
			cfg, warnings, err := m.generateSandboxConfig(pod, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.DnsConfig
			if !slices.Equal(got.Servers, tt.want.Servers) || !slices.Equal(got.Searches, tt.want.Searches) || !slices.Equal(got.Options, tt.want.Options) {
				t.Errorf("DNS config\n got servers %q searches %q options %q\nwant servers %q searches %q options %q",
					got.Servers, got.Searches, got.Options, tt.want.Servers, tt.want.Searches, tt.want.Options)
			}
			var types []schemas.EventType
			for _, w := range warnings {
				types = append(types, w.typ)
			}
			if !slices.Equal(types, tt.warnings) {
				t.Errorf("warnings %v, want %v", warnings, tt.warnings)
			}
			if tt.warning != "" && (len(warnings) == 0 || !strings.Contains(warnings[0].message, tt.warning)) {
				t.Errorf("warnings %v, want the first to say %q", warnings, tt.warning)
			}
		})
	}
}

// The sandbox's hostname: with setHostnameAsFQDN and a subdomain, the fully
// qualified name; one longer than the kernel's 64 characters fails the
// sandbox, as kubelet's; hostnameOverride has no domain.
func TestSandboxHostnameAsFQDN(t *testing.T) {
	m, _ := dnsManager(t, Config{ClusterDomain: "example.test"})
	pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
	pod.Spec.Hostname, pod.Spec.Subdomain = "web", "db"
	if cfg := sandboxConfig(t, m, pod); cfg.Hostname != "web" {
		t.Errorf("hostname %q, want web (setHostnameAsFQDN unset)", cfg.Hostname)
	}
	pod.Spec.SetHostnameAsFQDN = ptr(true)
	if cfg := sandboxConfig(t, m, pod); cfg.Hostname != "web.db.ns.svc.example.test" {
		t.Errorf("hostname %q, want web.db.ns.svc.example.test", cfg.Hostname)
	}
	pod.Spec.HostnameOverride = ptr("custom")
	if cfg := sandboxConfig(t, m, pod); cfg.Hostname != "custom" {
		t.Errorf("hostname %q, want the override alone", cfg.Hostname)
	}
	pod.Spec.HostnameOverride = nil
	pod.Spec.Hostname = strings.Repeat("h", 44)
	if _, _, err := m.generateSandboxConfig(pod, 0); err == nil || !strings.Contains(err.Error(), "FQDN "+pod.Spec.Hostname+".db.ns.svc.example.test is too long (64 characters is the max, 67 characters requested)") {
		t.Errorf("a 67-character FQDN: %v, want kubelet's error", err)
	}
}

// A sandbox's DNS warnings are recorded once, when it is created, with ids
// that a later sync of the same sandbox repeats.
func TestMissingClusterDNSIsRecordedOncePerSandbox(t *testing.T) {
	m, events := dnsManager(t, Config{})
	pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	for range 2 {
		if r := syncOnce(t, m, pod); r.Error() != nil {
			t.Fatal(r.Error())
		}
	}
	got := events.of(schemas.EventMissingClusterDNS)
	if len(got) != 1 || got[0].SandboxID == "" || got[0].Reason != "MissingClusterDNS" || !strings.Contains(got[0].Message, `pod: "ns/p"`) {
		t.Fatalf("MissingClusterDNS events %+v, want one about the pod's sandbox", got)
	}
}
