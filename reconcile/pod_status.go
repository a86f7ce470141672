package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
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

type podCache struct {
	sandboxes  map[string]*SandboxStatus
	containers map[string]*ContainerStatus
}

func newStatusCache() *statusCache { return &statusCache{pods: map[string]*podCache{}} }

func (c *statusCache) sandbox(uid, id string, state SandboxState) *SandboxStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pods[uid]; p != nil {
		if s := p.sandboxes[id]; s != nil && s.State == state {
			return s
		}
	}
	return nil
}

func (c *statusCache) container(uid, id string, state ContainerState) *ContainerStatus {
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
func (c *statusCache) replace(uid string, sandboxes []*SandboxStatus, containers []*ContainerStatus) {
	p := &podCache{sandboxes: make(map[string]*SandboxStatus, len(sandboxes)), containers: make(map[string]*ContainerStatus, len(containers))}
	for _, s := range sandboxes {
		p.sandboxes[s.ID] = s
	}
	for _, cs := range containers {
		if cs.State == ContainerRunning || cs.State == ContainerExited {
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

func (c *statusCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// GetPodStatus reads everything the runtime holds for the pod: its sandboxes
// and container instances, newest first. It asks the runtime alone, so a
// restarted jetlet sees exactly what runs; restart counts come from the
// instances' annotations.
func (m *Manager) GetPodStatus(ctx context.Context, uid, name, namespace string) (*PodStatus, error) {
	selector := map[string]string{LabelPodUID: uid}
	sandboxes, err := m.rt.ListPodSandbox(ctx, &SandboxFilter{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	slices.SortStableFunc(sandboxes, func(a, b *Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })

	status := &PodStatus{UID: uid, Name: name, Namespace: namespace}
	for _, sb := range sandboxes {
		s := m.cache.sandbox(uid, sb.ID, sb.State)
		if s == nil {
			s, err = m.rt.PodSandboxStatus(ctx, sb.ID)
			if IsNotFound(err) {
				// Removed between list and status: as if never listed.
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("status of sandbox %s of pod %s: %w", sb.ID, uid, err)
			}
		}
		status.SandboxStatuses = append(status.SandboxStatuses, s)
		// The newest one read (a newer listed one may have gone since).
		if len(status.SandboxStatuses) == 1 && s.State == SandboxReady {
			status.IPs = s.podIPs()
		}
	}

	containers, err := m.rt.ListContainers(ctx, &ContainerFilter{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	for _, c := range containers {
		cs := m.cache.container(uid, c.ID, c.State)
		if cs == nil {
			info, err := m.rt.ContainerStatus(ctx, c.ID)
			if IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("status of container %s of pod %s: %w", c.ID, uid, err)
			}
			cs = toContainerStatus(info, c.PodSandboxID)
		}
		status.ContainerStatuses = append(status.ContainerStatuses, cs)
	}
	slices.SortStableFunc(status.ContainerStatuses, func(a, b *ContainerStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	m.cache.replace(uid, status.SandboxStatuses, status.ContainerStatuses)
	if status.Name == "" && len(status.SandboxStatuses) > 0 {
		status.Name = status.SandboxStatuses[0].Metadata.Name
		status.Namespace = status.SandboxStatuses[0].Metadata.Namespace
	}
	// Hand out copies: the cached values stay as the runtime reported them.
	for i, cs := range status.ContainerStatuses {
		c := *cs
		status.ContainerStatuses[i] = &c
	}
	for i, s := range status.SandboxStatuses {
		c := *s
		status.SandboxStatuses[i] = &c
	}
	return status, nil
}

// toContainerStatus reads what jetlet keeps in labels and annotations.
func toContainerStatus(info *ContainerInfo, sandboxID string) *ContainerStatus {
	cs := &ContainerStatus{
		ID:         info.ID,
		Name:       info.Labels[LabelContainerName],
		SandboxID:  sandboxID,
		State:      info.State,
		CreatedAt:  info.CreatedAt,
		StartedAt:  info.StartedAt,
		FinishedAt: info.FinishedAt,
		ExitCode:   info.ExitCode,
		Image:      info.Image,
		ImageRef:   info.ImageRef,
		Reason:     info.Reason,
		Message:    info.Message,
		Hash:       info.Annotations[AnnotationContainerHash],
		Attempt:    info.Metadata.Attempt,
		Init:       info.Annotations[AnnotationContainerInit] == "true",
	}
	if cs.Name == "" {
		cs.Name = info.Metadata.Name
	}
	if n, err := strconv.Atoi(info.Annotations[AnnotationContainerRestartCount]); err == nil {
		cs.RestartCount = n
	}
	if g, ok := annotationInt(info.Annotations, AnnotationPodTerminationGracePeriod); ok {
		cs.TerminationGracePeriod = g
	}
	return cs
}

// GetPods returns what the runtime holds grouped by pod (the uid label):
// with all, every sandbox and container; else only ready sandboxes and
// running containers.
func (m *Manager) GetPods(ctx context.Context, all bool) ([]*RuntimePod, error) {
	var sf *SandboxFilter
	var cf *ContainerFilter
	if !all {
		ready, running := SandboxReady, ContainerRunning
		sf = &SandboxFilter{State: &ready}
		cf = &ContainerFilter{State: &running}
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
// ordered by namespace, name, uid.
func groupPods(sandboxes []*Sandbox, containers []*Container) []*RuntimePod {
	pods := map[string]*RuntimePod{}
	get := func(uid, name, ns string) *RuntimePod {
		p := pods[uid]
		if p == nil {
			p = &RuntimePod{UID: uid, Name: name, Namespace: ns}
			pods[uid] = p
		}
		return p
	}
	for _, s := range sandboxes {
		uid := s.Metadata.UID
		if uid == "" {
			uid = s.Labels[LabelPodUID]
		}
		if uid == "" {
			continue // not a pod of ours
		}
		p := get(uid, s.Metadata.Name, s.Metadata.Namespace)
		p.Sandboxes = append(p.Sandboxes, s)
	}
	for _, c := range containers {
		uid := c.Labels[LabelPodUID]
		if uid == "" {
			continue
		}
		p := get(uid, c.Labels[LabelPodName], c.Labels[LabelPodNamespace])
		p.Containers = append(p.Containers, c)
	}
	out := make([]*RuntimePod, 0, len(pods))
	for _, p := range pods {
		sort.SliceStable(p.Sandboxes, func(i, j int) bool { return p.Sandboxes[i].CreatedAt.After(p.Sandboxes[j].CreatedAt) })
		sort.SliceStable(p.Containers, func(i, j int) bool { return p.Containers[i].CreatedAt.After(p.Containers[j].CreatedAt) })
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UID < b.UID
	})
	return out
}
