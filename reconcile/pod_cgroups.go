package reconcile

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodCgroups is the node's pod cgroups (kubelet's pod container manager):
// jetlet makes a pod's cgroup, the runtime puts the pod's sandbox and
// containers under it.
type PodCgroups interface {
	// Parent is the cgroup_parent of pod's sandbox, in the runtime's
	// cgroup driver's form.
	Parent(pod *corev1.Pod) string
	// Ensure makes pod's cgroup with its resources, or applies them.
	Ensure(ctx context.Context, pod *corev1.Pod) error
	// RemoveGone removes the cgroups of the pods gone says are gone.
	RemoveGone(ctx context.Context, gone func(uid string) bool) error
}

// withCgroupParent gives the sandbox cfg of pod its pod cgroup.
func (m *Kuberuntime) withCgroupParent(cfg *runtimeapi.PodSandboxConfig, pod *corev1.Pod) {
	if m.cfg.PodCgroups != nil {
		cfg.Linux.CgroupParent = m.cfg.PodCgroups.Parent(pod)
	}
}

// ensurePodCgroup makes the pod's cgroup before anything of it runs, as
// kubelet's syncPod does before SyncPod; it reports whether the sync may go
// on.
func (s *podOperation) ensurePodCgroup(ctx context.Context) bool {
	pc := s.m.cfg.PodCgroups
	if pc == nil {
		return true
	}
	if err := pc.Ensure(ctx, s.pod); err != nil {
		s.result.SyncError = fmt.Errorf("failed to ensure that the pod: %s cgroups exist and are correctly applied: %w", s.pod.UID, err)
		return false
	}
	return true
}

// removeGoneCgroups removes the pod cgroups of the gone pods with nothing
// left in the runtime (kubelet's cleanupOrphanedPodCgroups).
func (m *Kuberuntime) removeGoneCgroups(ctx context.Context, gone func(uid string) bool, left map[string]bool) error {
	if m.cfg.PodCgroups == nil {
		return nil
	}
	return m.cfg.PodCgroups.RemoveGone(ctx, func(uid string) bool { return !left[uid] && gone(uid) })
}
