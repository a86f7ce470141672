package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
)

// statusCache keeps the CRI status of sandboxes and container instances
// whose state cannot have changed since: a listed sandbox or container whose
// state equals the cached one is not asked for its status again. A ready
// sandbox's IP and namespaces, a running container's start time and an
// exited container's exit are fixed, so the list's state alone tells
// whether the cached status is stale. A no-op sync of a converged pod thus
// costs two CRI calls (ListPodSandbox and ListContainers) and still notices a
// container that died: its listed state differs from the cached one.
type statusCache struct {
	mu   sync.Mutex
	pods map[string]*podCache
}

// podCache holds what one GetPodStatus read; its values are never changed
// once stored (the sandbox statuses are handed out as they are).
type podCache struct {
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*kubecontainer.ContainerStatus
}

func newStatusCache() *statusCache { return &statusCache{pods: map[string]*podCache{}} }

func (c *statusCache) sandbox(uid, id string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pods[uid]; p != nil {
		if s := p.sandboxes[id]; s != nil && s.State == state {
			return s
		}
	}
	return nil
}

func (c *statusCache) container(uid, id string, state kubecontainer.ContainerState) *kubecontainer.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pods[uid]; p != nil {
		if s := p.containers[id]; s != nil && s.State == state {
			return s
		}
	}
	return nil
}

// replace stores what one GetPodStatus saw, dropping what it did not.
func (c *statusCache) replace(uid string, sandboxes []*runtimeapi.PodSandboxStatus, containers []*kubecontainer.ContainerStatus) {
	p := &podCache{sandboxes: make(map[string]*runtimeapi.PodSandboxStatus, len(sandboxes)), containers: make(map[string]*kubecontainer.ContainerStatus, len(containers))}
	for _, s := range sandboxes {
		p.sandboxes[s.Id] = s
	}
	for _, cs := range containers {
		if cs.State == kubecontainer.ContainerRunning || cs.State == kubecontainer.ContainerExited {
			p.containers[cs.ID] = cs
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(sandboxes) == 0 && len(containers) == 0 {
		delete(c.pods, uid)
		return
	}
	c.pods[uid] = p
}

// forgetContainer drops the cached status of container id of pod uid: its
// resources changed, which its listed state does not show.
func (c *statusCache) forgetContainer(uid, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pods[uid]; p != nil {
		// The values of a podCache never change once stored: replace the map.
		containers := make(map[string]*kubecontainer.ContainerStatus, len(p.containers))
		for k, v := range p.containers {
			if k != id {
				containers[k] = v
			}
		}
		c.pods[uid] = &podCache{sandboxes: p.sandboxes, containers: containers}
	}
}

func (c *statusCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// GetPodStatus reads everything the runtime holds for the pod: its sandboxes
// and container instances, newest first. It asks the runtime alone, so a
// restarted jetlet sees exactly what runs; restart counts come from the
// instances' annotations.
func (m *Kuberuntime) GetPodStatus(ctx context.Context, uid, name, namespace string) (*kubecontainer.PodStatus, error) {
	selector := map[string]string{crilabels.LabelPodUID: uid}
	sandboxes, err := m.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	slices.SortStableFunc(sandboxes, newestSandboxFirst)

	status := &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: namespace}
	for _, sb := range sandboxes {
		s := m.cache.sandbox(uid, sb.Id, sb.State)
		if s == nil {
			resp, err := m.rt.PodSandboxStatus(ctx, sb.Id, false)
			if isNotFound(err) {
				// Removed between list and status: as if never listed.
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("status of sandbox %s of pod %s: %w", sb.Id, uid, err)
			}
			if s = resp.GetStatus(); s == nil {
				return nil, fmt.Errorf("status of sandbox %s of pod %s: the runtime returned none", sb.Id, uid)
			}
		}
		status.SandboxStatuses = append(status.SandboxStatuses, s)
		// The newest one read (a newer listed one may have gone since).
		if len(status.SandboxStatuses) == 1 && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			status.IPs = podIPs(s, m.cfg.NodeIP)
		}
	}

	status.NetworkDown = m.cfg.PodNetworkDown != nil && m.cfg.PodNetworkDown()

	containers, err := m.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	for _, c := range containers {
		cs := m.cache.container(uid, c.Id, toContainerState(c.State))
		if cs == nil {
			resp, err := m.rt.ContainerStatus(ctx, c.Id, false)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("status of container %s of pod %s: %w", c.Id, uid, err)
			}
			if resp.GetStatus() == nil {
				return nil, fmt.Errorf("status of container %s of pod %s: the runtime returned none", c.Id, uid)
			}
			cs = toContainerStatus(resp.GetStatus(), c.PodSandboxId)
			if cs.State == kubecontainer.ContainerExited {
				m.addTerminationMessage(cs, resp.GetStatus())
			}
		}
		status.ContainerStatuses = append(status.ContainerStatuses, cs)
	}
	slices.SortStableFunc(status.ContainerStatuses, func(a, b *kubecontainer.ContainerStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	m.cache.replace(uid, status.SandboxStatuses, status.ContainerStatuses)
	if status.Name == "" && len(status.SandboxStatuses) > 0 {
		status.Name = status.SandboxStatuses[0].GetMetadata().GetName()
		status.Namespace = status.SandboxStatuses[0].GetMetadata().GetNamespace()
	}
	// Hand out copies: the cached values stay as the runtime reported them.
	for i, cs := range status.ContainerStatuses {
		c := *cs
		status.ContainerStatuses[i] = &c
	}
	return status, nil
}

// toContainerStatus reads the CRI status and what jetlet keeps in labels and
// annotations, as kubelet's toKubeContainerStatus.
func toContainerStatus(s *runtimeapi.ContainerStatus, sandboxID string) *kubecontainer.ContainerStatus {
	annotations := s.GetAnnotations()
	cs := &kubecontainer.ContainerStatus{
		ID:         s.GetId(),
		Name:       s.GetLabels()[crilabels.LabelContainerName],
		SandboxID:  sandboxID,
		State:      toContainerState(s.GetState()),
		CreatedAt:  kubecontainer.FromNanos(s.GetCreatedAt()),
		StartedAt:  kubecontainer.FromNanos(s.GetStartedAt()),
		FinishedAt: kubecontainer.FromNanos(s.GetFinishedAt()),
		ExitCode:   s.GetExitCode(),
		Image:      s.GetImage().GetImage(),
		ImageRef:   s.GetImageRef(),
		Reason:     s.GetReason(),
		Message:    s.GetMessage(),
		Hash:       annotations[crilabels.AnnotationContainerHash],
		Attempt:    s.GetMetadata().GetAttempt(),
		Init:       annotations[crilabels.AnnotationContainerInit] == "true",
		PreStop:    preStopFromAnnotations(annotations),
		Resources:  appliedResources(s.GetResources().GetLinux()),
	}
	if cs.Name == "" {
		cs.Name = s.GetMetadata().GetName()
	}
	if n, err := strconv.Atoi(annotations[crilabels.AnnotationContainerRestartCount]); err == nil {
		cs.RestartCount = n
	}
	if g, ok := annotationInt(annotations, crilabels.AnnotationPodTerminationGracePeriod); ok {
		cs.TerminationGracePeriod = g
	}
	return cs
}

// GetPods returns what the runtime holds grouped by pod (the uid label):
// with all, every sandbox and container; else only ready sandboxes and
// running containers.
func (m *Kuberuntime) GetPods(ctx context.Context, all bool) ([]*kubecontainer.RuntimePod, error) {
	var sf *runtimeapi.PodSandboxFilter
	var cf *runtimeapi.ContainerFilter
	if !all {
		sf = &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
		cf = &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	}
	sandboxes, err := m.rt.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	containers, err := m.rt.ListContainers(ctx, cf)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return groupPods(sandboxes, containers), nil
}

// groupPods groups by pod uid; sandboxes and containers newest first, pods
// ordered by namespace, name, uid. It sorts its arguments.
func groupPods(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) []*kubecontainer.RuntimePod {
	slices.SortStableFunc(sandboxes, newestSandboxFirst)
	slices.SortStableFunc(containers, newestContainerFirst)
	pods := map[string]*kubecontainer.RuntimePod{}
	get := func(uid, name, ns string) *kubecontainer.RuntimePod {
		p := pods[uid]
		if p == nil {
			p = &kubecontainer.RuntimePod{UID: uid, Name: name, Namespace: ns}
			pods[uid] = p
		}
		return p
	}
	for _, s := range sandboxes {
		uid := sandboxPodUID(s)
		if uid == "" {
			continue // not a pod of ours
		}
		p := get(uid, s.GetMetadata().GetName(), s.GetMetadata().GetNamespace())
		p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{ID: s.Id, State: sandboxToContainerState(s.State)})
	}
	for _, c := range containers {
		uid := c.Labels[crilabels.LabelPodUID]
		if uid == "" {
			continue
		}
		p := get(uid, c.Labels[crilabels.LabelPodName], c.Labels[crilabels.LabelPodNamespace])
		p.Containers = append(p.Containers, &kubecontainer.Container{ID: c.Id, State: toContainerState(c.State)})
	}
	out := make([]*kubecontainer.RuntimePod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *kubecontainer.RuntimePod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return out
}

// sandboxPodUID is the uid of the sandbox's pod: its metadata's, else its
// label's; "" for a sandbox that is not a pod's.
func sandboxPodUID(s *runtimeapi.PodSandbox) string {
	if uid := s.GetMetadata().GetUid(); uid != "" {
		return uid
	}
	return s.Labels[crilabels.LabelPodUID]
}

// newestSandboxFirst and newestContainerFirst order listed items by creation, newest first.
func newestSandboxFirst(a, b *runtimeapi.PodSandbox) int {
	return cmp.Compare(b.CreatedAt, a.CreatedAt)
}

func newestContainerFirst(a, b *runtimeapi.Container) int {
	return cmp.Compare(b.CreatedAt, a.CreatedAt)
}
