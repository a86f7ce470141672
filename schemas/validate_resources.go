package schemas

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func validateResources(e *errs, p string, r *corev1.ResourceRequirements) {
	validateResourceList(e, p+".limits", r.Limits)
	validateResourceList(e, p+".requests", r.Requests)
	for _, name := range requestsOverLimits(r) {
		lim := r.Limits[name]
		e.invalid(p+".requests["+string(name)+"]", "must be less than or equal to the limit "+lim.String())
	}
	if len(r.Claims) > 0 {
		e.unsupported(p+".claims", "dynamic resource allocation needs the API server")
	}
}

// requestsOverLimits names the requests above their limit, in order (a
// map's order is random, and problems are reported in a stable one).
func requestsOverLimits(r *corev1.ResourceRequirements) []corev1.ResourceName {
	var over []corev1.ResourceName
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			over = append(over, name)
		}
	}
	slices.Sort(over)
	return over
}

func validateResourceList(e *errs, p string, l corev1.ResourceList) {
	for _, name := range sortedNames(l) {
		q := l[name]
		np := p + "[" + string(name) + "]"
		if !matchResourceName(string(name)) {
			e.unsupported(np, "this node accounts for cpu, memory, ephemeral-storage and hugepages-<size> only; extended resources need a device plugin")
		} else if size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix); ok {
			if q, err := resource.ParseQuantity(size); err != nil || q.Sign() <= 0 {
				e.invalid(np, "hugepages-<size> needs a page size such as 2Mi or 1Gi")
			}
		}
		if q.Sign() < 0 {
			e.invalid(np, "must be >= 0")
		}
	}
}

// rejectEphemeralStorageLimit reports the ephemeral-storage limit of the
// container at p (limits is its resources.limits): a request is the
// scheduler's, a limit would need the node to evict.
func rejectEphemeralStorageLimit(e *errs, p string, limits corev1.ResourceList) {
	if _, ok := limits[corev1.ResourceEphemeralStorage]; ok {
		e.unsupported(p+".resources.limits[ephemeral-storage]", "this node does not evict pods for local storage use")
	}
}

func validateResizePolicy(e *errs, p string, policies []corev1.ContainerResizePolicy) {
	for i, r := range policies {
		rp := idx(p+".resizePolicy", i)
		if r.ResourceName != corev1.ResourceCPU && r.ResourceName != corev1.ResourceMemory {
			e.invalid(rp+".resourceName", `must be "cpu" or "memory"`)
		}
		if r.RestartPolicy != corev1.NotRequired && r.RestartPolicy != corev1.RestartContainer {
			e.invalid(rp+".restartPolicy", `must be "NotRequired" or "RestartContainer"`)
		}
	}
}
