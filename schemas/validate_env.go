package schemas

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var resourceRefRE = regexp.MustCompile(resourceRefPattern)

// validateEnv checks a container's envFrom and env (s is the pod's spec,
// which a resourceFieldRef names a container of).
func validateEnv(e *errs, p string, c *corev1.Container, s *corev1.PodSpec) {
	for i, f := range c.EnvFrom {
		fp := idx(p+".envFrom", i)
		switch {
		case f.ConfigMapRef != nil && f.SecretRef != nil:
			e.invalid(fp, "configMapRef and secretRef are mutually exclusive")
		case f.ConfigMapRef != nil:
			validateObjectName(e, fp+".configMapRef.name", f.ConfigMapRef.Name)
		case f.SecretRef != nil:
			validateObjectName(e, fp+".secretRef.name", f.SecretRef.Name)
		default:
			e.invalid(fp, "must specify configMapRef or secretRef")
		}
		if f.Prefix != "" && !matchEnvName(f.Prefix) {
			e.invalid(fp+".prefix", "must consist of printable ASCII characters other than '='")
		}
	}
	for i, v := range c.Env {
		vp := idx(p+".env", i)
		if v.Name == "" {
			e.invalid(vp+".name", "required")
		} else if !matchEnvName(v.Name) {
			e.invalid(vp+".name", "must consist of printable ASCII characters other than '='")
		}
		if v.ValueFrom == nil {
			continue
		}
		if v.Value != "" {
			e.invalid(vp+".valueFrom", "may not be set when value is not empty")
		}
		validateEnvSource(e, vp, v.ValueFrom, s)
	}
}

// validateEnvSource checks the valueFrom of the env var at p: exactly one
// source: the downward API (a field or a resource of the pod), a ConfigMap's
// or a Secret's key.
func validateEnvSource(e *errs, p string, f *corev1.EnvVarSource, s *corev1.PodSpec) {
	n := 0
	if f.FieldRef != nil {
		n++
		switch {
		case f.FieldRef.FieldPath == "":
			e.invalid(p+".valueFrom.fieldRef.fieldPath", "required")
		case !matchFieldPath(f.FieldRef.FieldPath):
			e.invalid(p+".valueFrom.fieldRef.fieldPath", "not a field this node can expose")
		}
		if f.FieldRef.APIVersion != "v1" {
			e.invalid(p+".valueFrom.fieldRef.apiVersion", `must be "v1"`)
		}
	}
	if f.ResourceFieldRef != nil {
		n++
		validateResourceFieldRef(e, p+".valueFrom.resourceFieldRef", f.ResourceFieldRef, s)
	}
	if r := f.ConfigMapKeyRef; r != nil {
		n++
		validateObjectName(e, p+".valueFrom.configMapKeyRef.name", r.Name)
		if r.Key == "" {
			e.invalid(p+".valueFrom.configMapKeyRef.key", "required")
		}
	}
	if r := f.SecretKeyRef; r != nil {
		n++
		validateObjectName(e, p+".valueFrom.secretKeyRef.name", r.Name)
		if r.Key == "" {
			e.invalid(p+".valueFrom.secretKeyRef.key", "required")
		}
	}
	if f.FileKeyRef != nil {
		n++
		e.unsupported(p+".valueFrom.fileKeyRef", "environment from files in volumes is not supported by this node")
	}
	if n != 1 {
		e.invalid(p+".valueFrom", "must specify exactly one source")
	}
}

// Divisors the API server allows for a resourceFieldRef.
var (
	cpuDivisors     = []string{"1m", "1"}
	storageDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

func validateResourceFieldRef(e *errs, p string, r *corev1.ResourceFieldSelector, s *corev1.PodSpec) {
	if !resourceRefRE.MatchString(r.Resource) {
		e.invalid(p+".resource", "must be limits.<resource> or requests.<resource> for cpu, memory, ephemeral-storage or hugepages-<size>")
		return
	}
	if r.ContainerName != "" && !hasContainer(s, r.ContainerName) {
		e.invalid(p+".containerName", "no container "+strconv.Quote(r.ContainerName)+" in the pod")
	}
	if r.Divisor.IsZero() {
		return
	}
	allowed := storageDivisors
	if strings.HasSuffix(r.Resource, ".cpu") {
		allowed = cpuDivisors
	}
	if !slices.ContainsFunc(allowed, func(d string) bool { return r.Divisor.Cmp(resource.MustParse(d)) == 0 }) {
		e.invalid(p+".divisor", "must be one of "+strings.Join(allowed, ", "))
	}
}

func hasContainer(s *corev1.PodSpec, name string) bool {
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		if slices.ContainsFunc(list, func(c corev1.Container) bool { return c.Name == name }) {
			return true
		}
	}
	return false
}
