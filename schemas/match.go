package schemas

import "strings"

// The name rules of validate.go and names.go, written out by hand: they run
// for every name of every intent, and a regexp match costs a microsecond
// where these cost a few nanoseconds. Each agrees with the pattern of the
// same name, which the JSON Schemas carry (match_test.go checks that).

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

// matchDNSLabel is dnsLabelPattern: lowercase alphanumerics and '-',
// starting and ending with an alphanumeric.
func matchDNSLabel(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && !isLowerAlnum(c) {
			return false
		}
	}
	return true
}

// matchDNSSubdomain is dnsSubdomainPattern: DNS labels joined by '.'.
func matchDNSSubdomain(s string) bool {
	for {
		label, rest, more := strings.Cut(s, ".")
		if !matchDNSLabel(label) {
			return false
		}
		if !more {
			return true
		}
		s = rest
	}
}

// matchLabelValue is labelValuePattern: empty, or at most 63 alphanumerics,
// '-', '_' and '.', starting and ending with an alphanumeric.
func matchLabelValue(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && c != '_' && c != '.' && !isAlnum(c) {
			return false
		}
	}
	return true
}

// matchQualifiedName is qualifiedNamePattern: an optional DNS subdomain and
// '/', then a non-empty label value.
func matchQualifiedName(s string) bool {
	if prefix, name, found := strings.Cut(s, "/"); found {
		if !matchDNSSubdomain(prefix) {
			return false
		}
		s = name
	}
	return s != "" && matchLabelValue(s)
}

// matchEnvName is envNamePattern: printable ASCII but '='.
func matchEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '=' {
			return false
		}
	}
	return true
}

// matchUID is uidPattern: 1 to 128 of A-Z a-z 0-9 _ -.
func matchUID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '_' && c != '-' && !isAlnum(c) {
			return false
		}
	}
	return true
}

// matchResourceName is resourceNamePattern: cpu, memory, ephemeral-storage
// or hugepages- and a size of at least one character but a newline.
func matchResourceName(s string) bool {
	switch s {
	case "cpu", "memory", "ephemeral-storage":
		return true
	}
	size, ok := strings.CutPrefix(s, "hugepages-")
	return ok && size != "" && !strings.Contains(size, "\n")
}

// matchFieldPath is fieldPathPattern: the pod fields a downward API env var
// may name.
func matchFieldPath(s string) bool {
	switch s {
	case "metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations",
		"spec.nodeName", "spec.serviceAccountName",
		"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return true
	}
	key, ok := strings.CutPrefix(s, "metadata.labels['")
	if !ok {
		key, ok = strings.CutPrefix(s, "metadata.annotations['")
	}
	key, closed := strings.CutSuffix(key, "']")
	return ok && closed && key != "" && !strings.Contains(key, "'")
}
