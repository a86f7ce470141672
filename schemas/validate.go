package schemas

// Validation of a decoded pod: the API server's rules for a pod as far as
// they matter to a node, and this node's own (a field it cannot honour is
// refused as unsupported). checkPod (decode.go) runs them after defaulting,
// validateMetadata then validatePodSpec; each concern has its file:
//
//	validate_metadata.go    name, namespace, uid, labels, annotations
//	validate_pod.go         the spec: the pod-level fields the node cannot
//	                        honour, then those it does (restart and DNS
//	                        policy, hostname, host namespaces...), then the
//	                        volumes and each container
//	validate_volumes.go     volumes (a volume type goes here) and mounts
//	validate_containers.go  a container: name, image, policies, ports, and
//	                        the checks of the files below, in their order
//	validate_env.go         env, envFrom, the downward API's references
//	validate_resources.go   requests and limits, resize policies
//	validate_security.go    security contexts: seccomp and AppArmor
//	                        profiles (pod and container), privileged
//	validate_probes.go      probes, and the exec and httpGet handlers hooks
//	                        share with them
//	validate_lifecycle.go   lifecycle hooks and the stop signal
//
// Problems are reported through errs (errors.go) in a stable order, the
// order of the fields in the spec; this file holds the name rules they share.

import (
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Patterns of the names the API server checks. The JSON Schemas carry the
// same patterns (see schemagen_test.go).
const (
	dnsLabelPattern     = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	dnsSubdomainPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// Printable ASCII but '=': what a process environment can carry.
	envNamePattern  = `^[ -<>-~]+$`
	portNamePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// Resource names this node can account for.
	resourceNamePattern = `^(cpu|memory|ephemeral-storage|hugepages-.+)$`
	fieldPathPattern    = `^(metadata\.(name|namespace|uid|labels|annotations)|metadata\.(labels|annotations)\['[^']+'\]|spec\.(nodeName|serviceAccountName)|status\.(hostIP|hostIPs|podIP|podIPs))$`
	resourceRefPattern  = `^(limits|requests)\.(cpu|memory|ephemeral-storage|hugepages-.+)$`
	// A label or annotation key: an optional DNS subdomain prefix and '/',
	// then a name of at most 63 alphanumerics, '-', '_' and '.'.
	qualifiedNamePattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	labelValuePattern    = `^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	// The signals a container may be stopped with: Kubernetes' list for
	// Linux, which is the CRI's.
	stopSignalPattern = `^SIG(ABRT|ALRM|BUS|CHLD|CLD|CONT|FPE|HUP|ILL|INT|IO|IOT|KILL|PIPE|POLL|PROF|PWR|QUIT|SEGV|STKFLT|STOP|SYS|TERM|TRAP|TSTP|TTIN|TTOU|URG|USR1|USR2|VTALRM|WINCH|XCPU|XFSZ|RTMIN(\+([1-9]|1[0-5]))?|RTMAX(-([1-9]|1[0-4]))?)$`
)

func isDNSLabel(s string) bool     { return len(s) <= 63 && matchDNSLabel(s) }
func isDNSSubdomain(s string) bool { return len(s) <= 253 && matchDNSSubdomain(s) }

// isPortName is the IANA service name rule: at most 15 characters, lowercase
// letters, digits and single hyphens, at least one letter.
func isPortName(s string) bool {
	return len(s) <= 15 && matchDNSLabel(s) && strings.ContainsFunc(s, func(r rune) bool { return 'a' <= r && r <= 'z' }) && !strings.Contains(s, "--")
}

func isPortNumber(n int32) bool { return 1 <= n && n <= 65535 }

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// sortedNames returns the keys of m in order, so that problems are reported in
// a stable order.
func sortedNames[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CheckRelativePath says what is wrong with a path that must stay inside
// the directory it is relative to (a subPath, a file of a volume, a
// seccomp profile): absolute, or with a '..' element. reconcile checks an
// expanded subPathExpr with it.
func CheckRelativePath(p string) error {
	if path.IsAbs(p) {
		return errors.New("must be a relative path, not an absolute one")
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			return errors.New("must not contain '..'")
		}
	}
	return nil
}
