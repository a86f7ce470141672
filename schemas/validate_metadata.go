package schemas

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxAnnotationBytes bounds the total size of a pod's annotations.
const maxAnnotationBytes = 256 << 10

// isQualifiedName is the rule for label and annotation keys.
func isQualifiedName(s string) bool {
	prefix, _, found := strings.Cut(s, "/")
	return matchQualifiedName(s) && (!found || len(prefix) <= 253)
}

func validateMetadata(e *errs, m *metav1.ObjectMeta, subjectUID string) {
	const p = "pod.metadata"
	switch {
	case m.Name == "":
		e.invalid(p+".name", "required")
	case !isDNSSubdomain(m.Name):
		e.invalid(p+".name", "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)")
	}
	switch {
	case m.Namespace == "":
		e.invalid(p+".namespace", "required")
	case !isDNSLabel(m.Namespace):
		e.invalid(p+".namespace", "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")
	}
	switch {
	case m.UID == "":
		e.invalid(p+".uid", "required")
	case !ValidUID(string(m.UID)):
		e.invalid(p+".uid", "not a valid pod UID (1 to 128 of A-Z a-z 0-9 _ -)")
	case string(m.UID) != subjectUID:
		e.invalid(p+".uid", "is "+strconv.Quote(string(m.UID))+" but the subject's uid is "+strconv.Quote(subjectUID))
	}
	for _, k := range sortedNames(m.Labels) {
		switch {
		case !isQualifiedName(k):
			e.invalid(p+".labels["+k+"]", "key must be a qualified name ([prefix/]name, name at most 63 alphanumerics, '-', '_', '.')")
		case !matchLabelValue(m.Labels[k]):
			e.invalid(p+".labels["+k+"]", "value must be at most 63 alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric")
		}
	}
	size := 0
	for _, k := range sortedNames(m.Annotations) {
		size += len(k) + len(m.Annotations[k])
		if !isQualifiedName(k) {
			e.invalid(p+".annotations["+k+"]", "key must be a qualified name ([prefix/]name, name at most 63 alphanumerics, '-', '_', '.')")
		}
	}
	if size > maxAnnotationBytes {
		e.invalid(p+".annotations", "must total at most 256 KiB")
	}
}
