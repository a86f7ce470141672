package schemas

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The resolver's limits (glibc's), which the API server holds dnsConfig to.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// validateDNSConfig checks dnsConfig as the API server does: dnsPolicy None
// needs it with a nameserver; at most 3 IP nameservers; at most 32 search
// paths of 2048 characters in all, each a domain (a trailing dot, '_' and
// "." allowed, as with RelaxedDNSSearchValidation); options named.
func validateDNSConfig(e *errs, s *corev1.PodSpec) {
	const p = "pod.spec.dnsConfig"
	dc := s.DNSConfig
	if s.DNSPolicy == corev1.DNSNone {
		switch {
		case dc == nil:
			e.invalid(p, `required when dnsPolicy is "None"`)
			return
		case len(dc.Nameservers) == 0:
			e.invalid(p+".nameservers", `must provide at least one DNS nameserver when dnsPolicy is "None"`)
		}
	}
	if dc == nil {
		return
	}
	if len(dc.Nameservers) > maxDNSNameservers {
		e.invalid(p+".nameservers", fmt.Sprintf("must not have more than %d nameservers", maxDNSNameservers))
	}
	for i, ns := range dc.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			e.invalid(idx(p+".nameservers", i), "must be a valid IP address")
		}
	}
	if len(dc.Searches) > maxDNSSearchPaths {
		e.invalid(p+".searches", fmt.Sprintf("must not have more than %d search paths", maxDNSSearchPaths))
	}
	if len(strings.Join(dc.Searches, " ")) > maxDNSSearchListChars {
		e.invalid(p+".searches", fmt.Sprintf("must not have more than %d characters (including spaces) in the search list", maxDNSSearchListChars))
	}
	for i, search := range dc.Searches {
		if search != "." && !isDNSSubdomain(strings.ReplaceAll(strings.TrimSuffix(search, "."), "_", "a")) {
			e.invalid(idx(p+".searches", i), "must be a DNS-1123 subdomain (a trailing dot and '_' allowed) or \".\"")
		}
	}
	for i, o := range dc.Options {
		if o.Name == "" {
			e.invalid(idx(p+".options", i)+".name", "must not be empty")
		}
	}
}

// validateHostAliases: each alias an IP and DNS-1123 subdomains.
func validateHostAliases(e *errs, aliases []corev1.HostAlias) {
	for i, a := range aliases {
		p := idx("pod.spec.hostAliases", i)
		if _, err := netip.ParseAddr(a.IP); err != nil {
			e.invalid(p+".ip", "must be a valid IP address")
		}
		for j, h := range a.Hostnames {
			if !isDNSSubdomain(h) {
				e.invalid(idx(p+".hostnames", j), "must be a DNS-1123 subdomain")
			}
		}
	}
}
