package schemas

import (
	"regexp"
	"testing"
)

// FuzzNameRules checks each hand-written name rule against its pattern.
func FuzzNameRules(f *testing.F) {
	for _, s := range []string{"", "a", "a-b", "-a", "a-", "a.b", "a..b", ".a", "A", "a_b", "a/b", "x.io/a", "x.io/", "/a",
		"a/b/c", "x.io/A.b_c-D", "MODE", "a=b", "a\x7f", "a b", "é", "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b", "a\n", "cpu", "cpux", "hugepages-", "hugepages-2Mi", "hugepages-\n", "hugepages-\xff",
		"spec.nodeName", "metadata.labels", "metadata.labels['a']", "metadata.annotations['a/b']", "metadata.labels['']",
		"metadata.labels['a'b']", "metadata.labels['\n']", "metadata.labels['a']x", "status.podIPs"} {
		f.Add(s)
	}
	rules := []struct {
		pattern string
		match   func(string) bool
	}{
		{dnsLabelPattern, matchDNSLabel},
		{dnsSubdomainPattern, matchDNSSubdomain},
		{labelValuePattern, matchLabelValue},
		{qualifiedNamePattern, matchQualifiedName},
		{envNamePattern, matchEnvName},
		{uidPattern, matchUID},
		{nodeNamePattern, ValidNodeName},
		{resourceNamePattern, matchResourceName},
		{portNamePattern, matchDNSLabel},
		{fieldPathPattern, matchFieldPath},
	}
	res := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		res[i] = regexp.MustCompile(r.pattern)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, r := range rules {
			if want := res[i].MatchString(s); r.match(s) != want {
				t.Errorf("%s on %q: hand-written says %v, the pattern %v", r.pattern, s, !want, want)
			}
		}
	})
}
