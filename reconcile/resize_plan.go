package reconcile

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// minMilliCPULimit is the smallest CPU limit a CFS quota can express (its
// 1 ms minimum over the 100 ms period): limits at or below it are equal, as
// kubelet's cm.MinMilliCPULimit.
const minMilliCPULimit = minQuotaPeriod * milliCPUToCPU / defaultCPUPeriod

// ResourceValues are the resources of a container that a resize changes in
// place: what cgroups hold of them (the memory request is not one).
type ResourceValues struct {
	MemoryLimit int64 // bytes; 0: none
	CPULimit    int64 // millicores; 0: none
	CPURequest  int64 // millicores
}

// String is "memory limit 128Mi, cpu 100m/500m" (request/limit), for plans
// and logs.
func (v ResourceValues) String() string {
	return fmt.Sprintf("memory limit %s, cpu %s/%s", memoryString(v.MemoryLimit), cpuString(v.CPURequest), cpuString(v.CPULimit))
}

// memoryString and cpuString show bytes and millicores as quantities, 0 as
// "none".
func memoryString(bytes int64) string {
	if bytes == 0 {
		return "none"
	}
	return resource.NewQuantity(bytes, resource.BinarySI).String()
}

func cpuString(milli int64) string {
	if milli == 0 {
		return "none"
	}
	return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
}

// ContainerToUpdate is one running container whose resources the plan
// changes in place (the CRI's UpdateContainerResources), after kubelet's
// containerToUpdateInfo.
type ContainerToUpdate struct {
	ID        string
	Name      string
	Container *corev1.Container
	// Desired are the spec's values; Current what the runtime reports.
	Desired, Current ResourceValues
}

// desiredResources are the values of c's spec that a resize applies.
func desiredResources(c *corev1.Container) ResourceValues {
	return ResourceValues{
		MemoryLimit: c.Resources.Limits.Memory().Value(),
		CPULimit:    c.Resources.Limits.Cpu().MilliValue(),
		CPURequest:  c.Resources.Requests.Cpu().MilliValue(),
	}
}

// currentResources are the values the runtime reports for cs.
func currentResources(r *kubecontainer.ContainerResources) ResourceValues {
	var v ResourceValues
	if r.MemoryLimit != nil {
		v.MemoryLimit = r.MemoryLimit.Value()
	}
	if r.CPULimit != nil {
		v.CPULimit = r.CPULimit.MilliValue()
	}
	if r.CPURequest != nil {
		v.CPURequest = r.CPURequest.MilliValue()
	}
	return v
}

// resizeWanted compares a running instance's applied resources with its
// spec's, as kubelet's computePodResizeAction: values cgroups cannot tell
// apart (requests at or below the minimum shares, limits at or below the
// minimum quota) are equal. ok is false when the runtime reports no
// resources: nothing can be compared, nothing is resized.
func resizeWanted(c *corev1.Container, cs *kubecontainer.ContainerStatus) (desired, current ResourceValues, ok bool) {
	if cs.State != kubecontainer.ContainerRunning || cs.Resources == nil {
		return desired, current, false
	}
	desired, current = desiredResources(c), currentResources(cs.Resources)
	if desired.CPURequest <= minShares && current.CPURequest <= minShares {
		desired.CPURequest = current.CPURequest
	}
	if desired.CPULimit <= minMilliCPULimit && current.CPULimit <= minMilliCPULimit {
		desired.CPULimit = current.CPULimit
	}
	return desired, current, true
}

// ResizeInProgress reports whether a running instance's applied resources
// differ from its spec's: kubelet's isPodResizeInProgress for one container.
func ResizeInProgress(c *corev1.Container, cs *kubecontainer.ContainerStatus) bool {
	desired, current, ok := resizeWanted(c, cs)
	return ok && desired != current
}

// restartRequired is the container's resizePolicy for resource: whether a
// change of it restarts the container (RestartContainer) or not
// (NotRequired, the default).
func restartRequired(c *corev1.Container, name corev1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy == corev1.RestartContainer
		}
	}
	return false
}

// planResize plans the resize of a running instance whose spec is otherwise
// unchanged, as kubelet's computePodResizeAction: nothing when its applied
// resources are the spec's; a restart when the resizePolicy of a changed
// resource says RestartContainer, or when a limit is removed (cgroups keep a
// limit they are not given again, and Kubernetes refuses such a resize); else
// an in-place update per resource, decreases before increases. It returns
// whether the instance is kept.
func planResize(a *PodActions, c *corev1.Container, cs *kubecontainer.ContainerStatus, start func()) bool {
	desired, current, ok := resizeWanted(c, cs)
	if !ok || desired == current {
		return true
	}
	memory := desired.MemoryLimit != current.MemoryLimit
	cpu := desired.CPULimit != current.CPULimit || desired.CPURequest != current.CPURequest
	removed := desired.MemoryLimit == 0 && current.MemoryLimit != 0 || desired.CPULimit == 0 && current.CPULimit != 0
	if removed || memory && restartRequired(c, corev1.ResourceMemory) || cpu && restartRequired(c, corev1.ResourceCPU) {
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
			ID: cs.ID, Name: c.Name, Container: c, Reason: schemas.ReasonSpecChanged,
			Message: fmt.Sprintf("Container %s resize requires restart", c.Name),
		})
		start()
		return false
	}
	u := ContainerToUpdate{ID: cs.ID, Name: c.Name, Container: c, Desired: desired, Current: current}
	if memory {
		a.update(corev1.ResourceMemory, u)
	}
	if cpu {
		a.update(corev1.ResourceCPU, u)
	}
	return true
}

// update adds u to the containers whose resource is resized in place:
// decreases first (they free what increases take), each group in spec order.
func (a *PodActions) update(name corev1.ResourceName, u ContainerToUpdate) {
	if a.ContainersToUpdate == nil {
		a.ContainersToUpdate = map[corev1.ResourceName][]ContainerToUpdate{}
	}
	list := a.ContainersToUpdate[name]
	if !u.decreases(name) {
		a.ContainersToUpdate[name] = append(list, u)
		return
	}
	i := 0
	for i < len(list) && list[i].decreases(name) {
		i++
	}
	a.ContainersToUpdate[name] = append(list[:i], append([]ContainerToUpdate{u}, list[i:]...)...)
}

// decreases: the resource's limit goes down, or (cpu) the limit stays and the
// request goes down.
func (u ContainerToUpdate) decreases(name corev1.ResourceName) bool {
	if name == corev1.ResourceMemory {
		return u.Desired.MemoryLimit < u.Current.MemoryLimit
	}
	return u.Desired.CPULimit < u.Current.CPULimit || u.Desired.CPULimit == u.Current.CPULimit && u.Desired.CPURequest < u.Current.CPURequest
}

// resizeOrder is the order SyncPod resizes in, as kubelet's
// doPodResizeAction: memory, then cpu.
var resizeOrder = []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU}
