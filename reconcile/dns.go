package reconcile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

// The resolver's limits (glibc's), which kubelet cuts a pod's DNS config to.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchPathChars = 253 // a longer search path makes some resolvers abort
	maxKernelHostname     = 64
)

// DefaultClusterDomain is the cluster's DNS domain when Config.ClusterDomain
// is empty: kubeadm's, which kubelet's flag is set to almost everywhere.
const DefaultClusterDomain = "cluster.local"

// DefaultResolvConf is the node's resolver file (kubelet's --resolv-conf).
const DefaultResolvConf = "/etc/resolv.conf"

// dnsWarning is a Warning event a pod's DNS config makes, as kubelet's DNS
// configurer records them: the cluster DNS missing, or limits cut.
type dnsWarning struct {
	typ     schemas.EventType
	message string
}

// podDNSConfig is the DNS config of the pod's sandbox, as kubelet's
// dns.Configurer.GetPodDNS makes it from the pod's dnsPolicy and dnsConfig,
// the node's resolver file and the cluster DNS, and the warnings to record.
func (m *Kuberuntime) podDNSConfig(pod *corev1.Pod) (*runtimeapi.DNSConfig, []dnsWarning, error) {
	var warnings []dnsWarning
	cfg := &runtimeapi.DNSConfig{}
	if pod.Spec.DNSPolicy != corev1.DNSNone {
		host, err := readResolvConf(m.cfg.ResolvConf)
		if err != nil {
			return nil, nil, err
		}
		cfg = host
	}
	switch pod.Spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, "": // "": the API's default
		switch {
		case pod.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet && pod.Spec.HostNetwork:
			// ClusterFirst on the node's network: the node's resolver.
		case len(m.cfg.ClusterDNS) > 0:
			cfg.Servers = slices.Clone(m.cfg.ClusterDNS)
			cfg.Searches = m.clusterSearches(pod.Namespace, cfg.Searches)
			cfg.Options = []string{"ndots:5"}
		default:
			warnings = append(warnings, dnsWarning{schemas.EventMissingClusterDNS, fmt.Sprintf(
				"pod: %q. jetlet does not have ClusterDNS IP configured (--cluster-dns) and cannot create Pod using %q policy. Falling back to %q policy.",
				pod.Namespace+"/"+pod.Name, pod.Spec.DNSPolicy, corev1.DNSDefault)})
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = appendNew(cfg.Servers, dc.Nameservers...)
		cfg.Searches = appendNew(cfg.Searches, dc.Searches...)
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warnings = append(warnings, dnsWarning{schemas.EventDNSConfigForming,
			"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")})
	}
	var cut bool
	if cfg.Searches, cut = searchesWithinLimits(cfg.Searches); cut {
		warnings = append(warnings, dnsWarning{schemas.EventDNSConfigForming,
			"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(cfg.Searches, " ")})
	}
	return cfg, warnings, nil
}

// clusterSearches are a ClusterFirst pod's search paths: its namespace's
// services, the cluster's services, the cluster, then the node's.
func (m *Kuberuntime) clusterSearches(namespace string, host []string) []string {
	d := m.cfg.ClusterDomain
	return appendNew(nil, append([]string{namespace + ".svc." + d, "svc." + d, d}, host...)...)
}

// searchesWithinLimits drops the search paths a resolver cannot take, as
// kubelet does: beyond the 32nd, longer than 253 characters, then from the
// end until the line fits 2048 characters. It says whether it cut any.
func searchesWithinLimits(searches []string) ([]string, bool) {
	cut := false
	if len(searches) > maxDNSSearchPaths {
		searches, cut = searches[:maxDNSSearchPaths], true
	}
	kept := searches[:0:0]
	for _, s := range searches {
		if len(s) > maxDNSSearchPathChars {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	for len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	return kept, cut
}

// appendNew appends to list the values it does not hold yet.
func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// mergeDNSOptions: the pod's options override the base's of the same name
// ("name" or "name:value"), new ones go last. kubelet merges through a map,
// in random order; jetlet keeps the order, so the resolv.conf is stable.
func mergeDNSOptions(base []string, pod []corev1.PodDNSConfigOption) []string {
	opts := slices.Clone(base)
	for _, o := range pod {
		opt := o.Name
		if o.Value != nil && *o.Value != "" {
			opt += ":" + *o.Value
		}
		opts = setDNSOption(opts, opt)
	}
	return opts
}

// setDNSOption puts opt in opts, in place of an option of the same name.
func setDNSOption(opts []string, opt string) []string {
	name, _, _ := strings.Cut(opt, ":")
	if i := slices.IndexFunc(opts, func(o string) bool { n, _, _ := strings.Cut(o, ":"); return n == name }); i >= 0 {
		opts[i] = opt
		return opts
	}
	return append(opts, opt)
}

// readResolvConf reads the nameservers, searches and options of a resolver
// file as kubelet parses it: comments skipped, the last search line wins
// (trailing dots dropped, "." skipped), a later option replaces one of the
// same name. A missing file is an empty config, as a node without one.
func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return &runtimeapi.DNSConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the node's resolver file: %w", err)
	}
	cfg := &runtimeapi.DNSConfig{}
	lines := bufio.NewScanner(bytes.NewReader(data))
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search":
			cfg.Searches = nil
			for _, s := range fields[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			for _, o := range fields[1:] {
				cfg.Options = setDNSOption(cfg.Options, o)
			}
		}
	}
	return cfg, lines.Err()
}

// podHostnameAndDomain are the pod's hostname and, with a subdomain, its
// domain <subdomain>.<namespace>.svc.<cluster domain>, as kubelet's
// GeneratePodHostNameAndDomain: hostnameOverride has no domain.
func (m *Kuberuntime) podHostnameAndDomain(pod *corev1.Pod) (hostname, domain string) {
	hostname = podHostname(pod)
	if h := pod.Spec.HostnameOverride; h != nil && *h != "" {
		return hostname, ""
	}
	if pod.Spec.Subdomain != "" {
		domain = pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + m.cfg.ClusterDomain
	}
	return hostname, domain
}

// kernelHostname is the hostname the pod's UTS namespace gets: its
// hostname, or with setHostnameAsFQDN and a domain its fully qualified
// name, which must fit the kernel's 64 characters.
func (m *Kuberuntime) kernelHostname(pod *corev1.Pod) (string, error) {
	hostname, domain := m.podHostnameAndDomain(pod)
	if fqdn := pod.Spec.SetHostnameAsFQDN; fqdn == nil || !*fqdn || domain == "" {
		return hostname, nil
	}
	full := hostname + "." + domain
	if len(full) > maxKernelHostname {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", full, maxKernelHostname, len(full))
	}
	return full, nil
}
