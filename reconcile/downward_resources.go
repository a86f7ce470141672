package reconcile

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resourceFieldValue resolves a downward API resourceFieldRef as kubelet
// does: the named container's (or this one's) request or limit, divided by
// the divisor (1 when zero) and rounded up; a cpu, memory or
// ephemeral-storage limit that is not set reads the node's allocatable
// (kubelet's defaultPodLimitsForDownwardAPI).
func (m *Kuberuntime) resourceFieldValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	target := c
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		target = podContainer(pod, ref.ContainerName)
		if target == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q in the pod", ref.ContainerName)
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
	}
	res := corev1.ResourceName(name)
	var q resource.Quantity
	if kind == "requests" {
		q = target.Resources.Requests[res]
	} else {
		var err error
		if q, err = m.limitOrAllocatable(target, res); err != nil {
			return "", err
		}
	}
	switch {
	case res == corev1.ResourceCPU:
		return ceilDiv(float64(q.MilliValue()), float64(divisor.MilliValue())), nil
	case res == corev1.ResourceMemory, res == corev1.ResourceEphemeralStorage, strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		return ceilDiv(float64(q.Value()), float64(divisor.Value())), nil
	}
	return "", fmt.Errorf("resourceFieldRef: unsupported resource %q", ref.Resource)
}

// limitOrAllocatable is the container's limit of res; for cpu, memory and
// ephemeral-storage without one (or a zero one), the node's allocatable.
// Huge pages are never overcommitted: their limit is what is set.
func (m *Kuberuntime) limitOrAllocatable(c *corev1.Container, res corev1.ResourceName) (resource.Quantity, error) {
	if q, ok := c.Resources.Limits[res]; ok && !q.IsZero() {
		return q, nil
	}
	switch res {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
	default:
		return c.Resources.Limits[res], nil
	}
	q, ok := m.cfg.NodeAllocatable[res]
	if !ok {
		return resource.Quantity{}, fmt.Errorf("resourceFieldRef: container %q has no %s limit and the node's allocatable %s is unknown", c.Name, res, res)
	}
	return q, nil
}

func ceilDiv(v, divisor float64) string {
	return strconv.FormatInt(int64(math.Ceil(v/divisor)), 10)
}

// podContainer is the pod's init or app container called name, or nil.
func podContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
