package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

// GarbageCollect removes what is dead and no longer needed, after kubelet's
// containerGC:
//
//  1. Dead container instances (not running, older than GC.MinAge): of a pod
//     that is gone, all; else, per container, all but the newest
//     GC.MaxPerPodContainer. The newest instance of a container that does not
//     run is never removed while its pod is wanted: its restart count and exit
//     are the container's status.
//  2. Sandboxes that are not ready and hold no container: of a pod that is
//     gone, all; else all but the newest.
//  3. Pod directories (logs, emptyDir volumes) of pods that are gone and have
//     no sandbox left.
//
// pods says which pods are gone. Errors are collected; GC goes on past them.
func (m *Manager) GarbageCollect(ctx context.Context, pods PodStateProvider) error {
	var errs []error
	now := m.cfg.Clock.Now()
	sandboxes, err := m.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("gc: list sandboxes: %w", err)
	}
	containers, err := m.rt.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("gc: list containers: %w", err)
	}
	gone := func(uid string) bool { return pods.ShouldPodContentBeRemoved(uid) }

	// 1. Containers, grouped by pod and container name, newest first.
	type key struct{ uid, name string }
	groups := map[key][]*runtimeapi.Container{}
	for _, c := range containers {
		uid := c.Labels[LabelPodUID]
		if uid == "" {
			continue
		}
		k := key{uid, c.Labels[LabelContainerName]}
		groups[k] = append(groups[k], c)
	}
	remaining := map[string]int{} // containers left per sandbox
	left := map[string]bool{}     // pods with a container or a sandbox left
	for k, g := range groups {
		slices.SortStableFunc(g, newestContainerFirst)
		podGone := gone(k.uid)
		keepDead := m.cfg.GC.MaxPerPodContainer
		deadKept := 0
		for i, c := range g {
			evictable := c.State != runtimeapi.ContainerState_CONTAINER_RUNNING && now.Sub(time.Unix(0, c.CreatedAt)) >= m.cfg.GC.MinAge
			keep := !evictable
			if evictable && !podGone {
				protected := i == 0 // the newest instance, and it does not run
				if protected || keepDead < 0 || deadKept < keepDead {
					keep = true
					deadKept++
				}
			}
			if keep {
				remaining[c.PodSandboxId]++
				left[k.uid] = true
				continue
			}
			if err := m.rt.RemoveContainer(ctx, c.Id); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
				remaining[c.PodSandboxId]++
				left[k.uid] = true
				continue
			}
			rc, _ := strconv.Atoi(c.Annotations[AnnotationContainerRestartCount])
			ns, name := c.Labels[LabelPodNamespace], c.Labels[LabelPodName]
			_ = os.Remove(filepath.Join(podLogsDir(m.cfg.LogDir, ns, name, k.uid), containerLogPath(k.name, rc)))
			m.containerEvent(ctx, podRef{k.uid, ns, name}, schemas.EventContainerRemoved, k.name, c.Id, c.PodSandboxId, c.GetMetadata().GetAttempt(), "", "garbage collected")
		}
	}

	// 2. Sandboxes, grouped by pod, newest first.
	byPod := map[string][]*runtimeapi.PodSandbox{}
	for _, s := range sandboxes {
		uid := sandboxPodUID(s)
		if uid == "" {
			continue
		}
		byPod[uid] = append(byPod[uid], s)
	}
	for uid, ss := range byPod {
		slices.SortStableFunc(ss, newestSandboxFirst)
		podGone := gone(uid)
		for i, s := range ss {
			removable := s.State != runtimeapi.PodSandboxState_SANDBOX_READY && remaining[s.Id] == 0 && (podGone || i > 0)
			if !removable {
				left[uid] = true
				continue
			}
			if err := m.rt.RemovePodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove sandbox %s: %w", s.Id, err))
				left[uid] = true
				continue
			}
			md := s.GetMetadata()
			m.sandboxEvent(ctx, podRef{uid, md.GetNamespace(), md.GetName()}, schemas.EventSandboxRemoved, s.Id, md.GetAttempt(), "garbage collected")
		}
	}

	// 3. Directories of gone pods with nothing left: logs, then data (emptyDirs).
	if entries, err := os.ReadDir(m.cfg.LogDir); err == nil {
		for _, e := range entries {
			parts := strings.Split(e.Name(), "_")
			if !e.IsDir() || len(parts) != 3 {
				continue
			}
			uid := parts[2]
			if left[uid] || !gone(uid) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(m.cfg.LogDir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if entries, err := os.ReadDir(filepath.Join(m.cfg.DataDir, "pods")); err == nil {
		for _, e := range entries {
			uid := e.Name()
			if !e.IsDir() || left[uid] || !gone(uid) {
				continue
			}
			if err := os.RemoveAll(m.podDataDir(uid)); err != nil {
				errs = append(errs, err)
				continue
			}
			m.cache.forget(uid)
			m.reasons.forgetPod(uid)
		}
	}
	m.backOff.GC()
	m.imageBackOff.GC()
	return errors.Join(errs...)
}
