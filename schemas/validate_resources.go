package schemas

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
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

// validatePodResources checks the pod-level resources as the API server's
// validatePodResources (KEP-2837): cpu, memory and hugepages-<size> only,
// no claims, requests at most their limits, the pod's requests at least
// what its containers request together, and no app container's limit above the
// pod's.
func validatePodResources(e *errs, s *corev1.PodSpec) {
	const p = "pod.spec.resources"
	r := s.Resources
	if r == nil {
		return
	}
	supported := *r // what the node can check further
	supported.Limits, supported.Requests = nil, nil
	for _, list := range []struct {
		path string
		l    corev1.ResourceList
		out  *corev1.ResourceList
	}{{p + ".limits", r.Limits, &supported.Limits}, {p + ".requests", r.Requests, &supported.Requests}} {
		for _, name := range sortedNames(list.l) {
			if !resourcehelper.IsSupportedPodLevelResource(name) {
				e.unsupported(list.path+"["+string(name)+"]", "pod-level resources are cpu, memory and hugepages-<size> only")
				continue
			}
			if *list.out == nil {
				*list.out = corev1.ResourceList{}
			}
			(*list.out)[name] = list.l[name]
		}
	}
	validateResources(e, p, &supported)
	aggregate := resourcehelper.AggregateContainerRequests(&corev1.Pod{Spec: *s}, resourcehelper.PodResourcesOptions{})
	for _, name := range sortedNames(aggregate) {
		pod, ok := r.Requests[name]
		if sum := aggregate[name]; ok && resourcehelper.IsSupportedPodLevelResource(name) && sum.Cmp(pod) > 0 {
			e.invalid(p+".requests["+string(name)+"]", "must be greater than or equal to the containers' requests together, "+sum.String())
		}
	}
	for i := range s.Containers {
		limits := s.Containers[i].Resources.Limits
		for _, name := range sortedNames(limits) {
			pod, ok := r.Limits[name]
			if lim := limits[name]; ok && lim.Cmp(pod) > 0 {
				e.invalid(idx("pod.spec.containers", i)+".resources.limits["+string(name)+"]", "must be less than or equal to the pod-level limit "+pod.String())
			}
		}
	}
}
