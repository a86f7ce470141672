package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/schemas"
)

// podSandboxResources are the limits of the pod's cgroup, the sandbox's
// LinuxPodSandboxConfig.resources: kubelet's ResourceConfigForPod with
// pod-level resources (KEP-2837). CPU shares from the pod's requests (the
// pod-level ones where set); a CFS quota and a memory limit from its limits
// when the pod is Guaranteed, or Burstable with the pod-level limit or a
// limit on every container; BestEffort pods the minimum shares only.
// kubelet fills the sandbox's resources with the plain sums (for VM
// runtimes' annotations) and limits its own pod cgroup with these; jetlet
// sends these, which the embedded runtime applies to the pod cgroup it makes
// (containerd keeps them as the sandbox's annotations). Overhead is left
// out (no RuntimeClasses).
// The value is kept per pod and computed again only when the pod's
// resources or QoS class change (component-helpers' aggregations were a
// tenth of a no-op sync's allocations, at its plan and at its status); the
// caller gets a copy of its own.
func (m *Kuberuntime) podSandboxResources(pod *corev1.Pod) *runtimeapi.LinuxContainerResources {
	uid := string(pod.UID)
	if r := m.podResources.sandboxResources(uid, pod); r != nil {
		return r
	}
	r := computePodSandboxResources(pod, m.cfg.DisableCPUQuota)
	m.podResources.keepSandboxResources(uid, pod, r)
	return cgroupValues(r)
}

func computePodSandboxResources(pod *corev1.Pod, disableCPUQuota bool) *runtimeapi.LinuxContainerResources {
	cpuDeclared, memoryDeclared := true, true
	for i := range pod.Spec.Containers {
		l := pod.Spec.Containers[i].Resources.Limits
		cpuDeclared = cpuDeclared && !l.Cpu().IsZero()
		memoryDeclared = memoryDeclared && !l.Memory().IsZero()
	}
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	if pl := pod.Spec.Resources; pl != nil {
		cpuDeclared = cpuDeclared || !pl.Limits.Cpu().IsZero()
		memoryDeclared = memoryDeclared || !pl.Limits.Memory().IsZero()
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	r := &runtimeapi.LinuxContainerResources{CpuShares: milliCPUToShares(requests.Cpu().MilliValue())}
	qos := admission.PodQOS(pod)
	if qos == corev1.PodQOSBestEffort {
		r.CpuShares = minShares
		return r
	}
	if (qos == corev1.PodQOSGuaranteed || cpuDeclared) && !disableCPUQuota {
		r.CpuPeriod = defaultCPUPeriod
		r.CpuQuota = milliCPUToQuota(limits.Cpu().MilliValue(), defaultCPUPeriod)
	}
	if qos == corev1.PodQOSGuaranteed || memoryDeclared {
		r.MemoryLimitInBytes = limits.Memory().Value()
	}
	if pl := pod.Spec.Resources; pl != nil {
		r.HugepageLimits = hugepageLimits(pl.Limits)
	}
	return r
}

// podResourcesFile records, in a pod's data dir, the resources its pod
// cgroup was last given (kubelet's actuated resources checkpoint, for the
// pod level): each sync compares them with the allocated pod's, a restarted
// jetlet's too; the CRI reports no sandbox's resources to compare with.
const podResourcesFile = "actuated-pod-resources.json"

// podResourcesRecord is what podResourcesFile holds: the sandbox it was
// given to, and the values.
type podResourcesRecord struct {
	SandboxID     string                      `json:"sandboxID"`
	CPUShares     int64                       `json:"cpuShares"`
	CPUQuota      int64                       `json:"cpuQuota"`
	CPUPeriod     int64                       `json:"cpuPeriod"`
	MemoryLimit   int64                       `json:"memoryLimit"`
	HugepageLimit []*runtimeapi.HugepageLimit `json:"hugepageLimits,omitempty"`
}

// cgroupValues is a copy of the values of r a pod cgroup is given.
func cgroupValues(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{CpuShares: r.CpuShares, CpuQuota: r.CpuQuota, CpuPeriod: r.CpuPeriod,
		MemoryLimitInBytes: r.MemoryLimitInBytes, HugepageLimits: r.HugepageLimits}
}

func (r *podResourcesRecord) resources() *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{CpuShares: r.CPUShares, CpuQuota: r.CPUQuota, CpuPeriod: r.CPUPeriod,
		MemoryLimitInBytes: r.MemoryLimit, HugepageLimits: r.HugepageLimit}
}

// podResourcesCache keeps each pod's podResourcesRecord as last written or
// read, so that its file is read once a run, not at each sync's plan and
// status (a file read each was a third of a no-op sync's syscalls). The
// pod workers of different pods use it at once; mu guards records, and is
// held through a first read so that no older read replaces a newer write.
//
// It keeps too each pod's sandbox resources as last computed, with the pod
// they were computed from (podSandboxResources).
type podResourcesCache struct {
	mu      sync.Mutex
	records map[string]*podResourcesRecord // by pod uid; nil: none on disk
	desired map[string]sandboxResources    // by pod uid
}

// sandboxResources are a pod's sandbox resources, and a copy of what of
// the pod they were computed from (a caller may change its pod in place):
// what admission.HoldsTheSame compares and the QoS class.
type sandboxResources struct {
	pod       *corev1.Pod
	resources *runtimeapi.LinuxContainerResources
}

func newPodResourcesCache() *podResourcesCache {
	return &podResourcesCache{records: map[string]*podResourcesRecord{}, desired: map[string]sandboxResources{}}
}

// sandboxResources is a copy of the sandbox resources kept for uid when
// they were computed from a pod whose resources and QoS class are pod's;
// nil otherwise.
func (c *podResourcesCache) sandboxResources(uid string, pod *corev1.Pod) *runtimeapi.LinuxContainerResources {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept, ok := c.desired[uid]
	if !ok || kept.pod.Status.QOSClass != pod.Status.QOSClass || !admission.HoldsTheSame(kept.pod, pod) {
		return nil
	}
	return cgroupValues(kept.resources)
}

func (c *podResourcesCache) keepSandboxResources(uid string, pod *corev1.Pod, r *runtimeapi.LinuxContainerResources) {
	kept := sandboxResources{pod: resourcesOf(pod), resources: r}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.desired[uid] = kept
}

// resourcesOf is a copy of what of pod admission.HoldsTheSame compares,
// and its QoS class.
func resourcesOf(pod *corev1.Pod) *corev1.Pod {
	containers := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: *c.Resources.DeepCopy(), Ports: slices.Clone(c.Ports)}
			if c.RestartPolicy != nil {
				policy := *c.RestartPolicy
				out[i].RestartPolicy = &policy
			}
		}
		return out
	}
	return &corev1.Pod{
		Spec: corev1.PodSpec{InitContainers: containers(pod.Spec.InitContainers), Containers: containers(pod.Spec.Containers),
			Resources: pod.Spec.Resources.DeepCopy(), Overhead: pod.Spec.Overhead.DeepCopy()},
		Status: corev1.PodStatus{QOSClass: pod.Status.QOSClass},
	}
}

// load is uid's record, read from path at the first ask; nil when there is
// none. One that cannot be read is read again at the next ask.
func (c *podResourcesCache) load(uid, path string) (*podResourcesRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec, ok := c.records[uid]; ok {
		return rec, nil
	}
	var rec *podResourcesRecord
	var r podResourcesRecord
	switch err := atomicfile.ReadJSON(path, &r); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		rec = &r
	}
	c.records[uid] = rec
	return rec, nil
}

func (c *podResourcesCache) store(uid string, rec *podResourcesRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records[uid] = rec
}

func (c *podResourcesCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.records, uid)
	delete(c.desired, uid)
}

// recordPodResources records res as what sandbox's pod cgroup holds.
func (m *Kuberuntime) recordPodResources(uid, sandbox string, res *runtimeapi.LinuxContainerResources) error {
	dir, err := m.makePodDataDir(uid)
	if err != nil {
		return err
	}
	rec := &podResourcesRecord{
		SandboxID: sandbox, CPUShares: res.CpuShares, CPUQuota: res.CpuQuota, CPUPeriod: res.CpuPeriod,
		MemoryLimit: res.MemoryLimitInBytes, HugepageLimit: res.HugepageLimits,
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, podResourcesFile), rec); err != nil {
		return err
	}
	m.podResources.store(uid, rec)
	return nil
}

// actuatedPodResources are what the pod cgroup of sandbox was last given;
// nil when nothing is recorded for that sandbox (a pod started by a jetlet
// that did not record them: nothing is resized at the pod level).
func (m *Kuberuntime) actuatedPodResources(uid, sandbox string) *runtimeapi.LinuxContainerResources {
	rec, err := m.podResources.load(uid, filepath.Join(m.podDataDir(uid), podResourcesFile))
	if err != nil {
		m.log.Warn().Err(err).Str("uid", uid).Msg("the pod cgroup's recorded resources cannot be read: its pod-level resources are not resized")
		return nil
	}
	if rec == nil || rec.SandboxID != sandbox {
		return nil
	}
	return rec.resources()
}

// PodResourcesUpdate is the plan's resize of the pod cgroup (KEP-5419): the
// sandbox's resources from Current to Desired, through the CRI's
// UpdatePodSandboxResources, around the containers' resizes.
type PodResourcesUpdate struct {
	SandboxID        string
	Desired, Current *runtimeapi.LinuxContainerResources
}

// planPodResize is the pod cgroup's part of kubelet's computePodResizeAction:
// an update when the allocated pod's sandbox resources are not those the
// running sandbox was given. A limit removed is kept (kubelet's, #128675):
// cgroups keep a value they are not given again. Values cgroups cannot tell
// apart (the minimum shares, the minimum quota) are equal.
func (m *Kuberuntime) planPodResize(pod *corev1.Pod, a PodActions) *PodResourcesUpdate {
	if a.KillPod || a.CreateSandbox || a.SandboxID == "" {
		return nil
	}
	current := m.actuatedPodResources(string(pod.UID), a.SandboxID)
	if current == nil {
		return nil
	}
	desired := m.podSandboxResources(pod)
	if desired.MemoryLimitInBytes == 0 {
		desired.MemoryLimitInBytes = current.MemoryLimitInBytes
	}
	if desired.CpuQuota == 0 {
		desired.CpuQuota, desired.CpuPeriod = current.CpuQuota, current.CpuPeriod
	}
	if sameCgroupValues(desired, current) {
		return nil
	}
	return &PodResourcesUpdate{SandboxID: a.SandboxID, Desired: desired, Current: current}
}

// sameCgroupValues reports whether a and b give a cgroup the same cpu and
// memory values.
func sameCgroupValues(a, b *runtimeapi.LinuxContainerResources) bool {
	return a.MemoryLimitInBytes == b.MemoryLimitInBytes && a.CpuShares == b.CpuShares &&
		quotaToMilliCPU(a.CpuQuota, a.CpuPeriod) == quotaToMilliCPU(b.CpuQuota, b.CpuPeriod)
}

// podResizeInProgress reports whether the pod cgroup of the pod's running
// sandbox does not yet hold the allocated pod's resources.
func (m *Kuberuntime) podResizeInProgress(pod *corev1.Pod, status *kubecontainer.PodStatus) bool {
	if len(status.SandboxStatuses) == 0 || status.SandboxStatuses[0].GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return false
	}
	return m.planPodResize(pod, PodActions{SandboxID: status.SandboxStatuses[0].GetId()}) != nil
}

// resizePodCgroup gives the pod cgroup name's value of to (the other
// resource's stays as applied), as kubelet's setPodCgroupConfig, and
// records what it holds then. With jetlet's own pod cgroups (a CRI runtime)
// the runtime is told through UpdatePodSandboxResources after the fact, as
// kubelet does, and its failure is no failure of the resize; nor is a
// runtime's Unimplemented (it resizes no pod cgroup). A memory limit is not lowered to or below
// what the pod's containers use.
func (s *podOperation) resizePodCgroup(ctx context.Context, u *PodResourcesUpdate, name corev1.ResourceName, applied *runtimeapi.LinuxContainerResources) error {
	next := cgroupValues(applied)
	if name == corev1.ResourceMemory {
		next.MemoryLimitInBytes = u.Desired.MemoryLimitInBytes
		if next.MemoryLimitInBytes < applied.MemoryLimitInBytes {
			if err := s.checkPodMemoryUsage(ctx, u.SandboxID, next.MemoryLimitInBytes); err != nil {
				return err
			}
		}
	} else {
		next.CpuShares, next.CpuQuota, next.CpuPeriod = u.Desired.CpuShares, u.Desired.CpuQuota, u.Desired.CpuPeriod
	}
	if sameCgroupValues(next, applied) {
		return nil
	}
	if err := s.m.rt.UpdatePodSandboxResources(ctx, u.SandboxID, next); err != nil {
		if s.m.cfg.PodCgroups == nil && !errors.Is(err, crierr.ErrUnimplemented) {
			return err
		}
		// jetlet's pod cgroup holds the limits (ensurePodCgroup applied
		// them), or the runtime has no pod-level resize (containerd 1.x):
		// it is only told, best effort as kubelet's.
		s.m.log.Debug().Err(err).Str("uid", s.ref.UID).Msg("the runtime did not take the pod's new resources")
	}
	applied.CpuShares, applied.CpuQuota, applied.CpuPeriod, applied.MemoryLimitInBytes = next.CpuShares, next.CpuQuota, next.CpuPeriod, next.MemoryLimitInBytes
	s.result.Add(schemas.ActionUpdatePodSandboxResources, s.ref.UID, podResizedMessage(name, u.Current, next))
	if err := s.m.recordPodResources(s.ref.UID, u.SandboxID, next); err != nil {
		s.m.log.Warn().Err(err).Str("uid", s.ref.UID).Msg("the pod cgroup's resources are not recorded: a restarted jetlet applies them again")
	}
	return nil
}

// checkPodMemoryUsage refuses a pod memory limit at or below what the pod's
// containers use together (kubelet reads the pod cgroup's usage).
func (s *podOperation) checkPodMemoryUsage(ctx context.Context, sandbox string, limit int64) error {
	stats, err := s.m.rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{PodSandboxId: sandbox})
	if err != nil {
		return fmt.Errorf("read memory usage: %w", err)
	}
	var usage uint64
	for _, st := range stats {
		usage += st.GetMemory().GetUsageBytes().GetValue()
	}
	if usage >= uint64(limit) {
		return fmt.Errorf("aborting attempt to set pod memory limit %s, not above current memory usage %s",
			resource.NewQuantity(limit, resource.BinarySI), resource.NewQuantity(int64(usage), resource.BinarySI))
	}
	return nil
}

// podResizedMessage says what a pod cgroup update changed: "pod memory
// limit 128Mi -> 256Mi", "pod cpu shares/quota 102/50m -> 204/1".
func podResizedMessage(name corev1.ResourceName, from, to *runtimeapi.LinuxContainerResources) string {
	if name == corev1.ResourceMemory {
		return fmt.Sprintf("pod memory limit %s -> %s", memoryString(from.MemoryLimitInBytes), memoryString(to.MemoryLimitInBytes))
	}
	return fmt.Sprintf("pod cpu request/limit %s/%s -> %s/%s",
		cpuString(sharesToMilliCPU(from.CpuShares)), cpuString(quotaToMilliCPU(from.CpuQuota, from.CpuPeriod)),
		cpuString(sharesToMilliCPU(to.CpuShares)), cpuString(quotaToMilliCPU(to.CpuQuota, to.CpuPeriod)))
}

// podResourcesString is "memory limit 128Mi, cpu 100m/500m" (request/limit)
// of a pod cgroup's values, for plans and logs.
func podResourcesString(r *runtimeapi.LinuxContainerResources) string {
	return ResourceValues{MemoryLimit: r.MemoryLimitInBytes, CPULimit: quotaToMilliCPU(r.CpuQuota, r.CpuPeriod), CPURequest: sharesToMilliCPU(r.CpuShares)}.String()
}
