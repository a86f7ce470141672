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

	"github.com/jetlet/jetlet/reconcile/containerlogs"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
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
// Before anything of a pod is removed, every fact its runtime state implies
// (PodFacts: sandbox created, containers created, started, died) is emitted
// and, when the Emitter is a Flusher, stored: nothing could derive them once
// the objects are gone. A pod whose facts cannot be stored keeps everything
// until a later collection.
//
// pods says which pods are gone. Errors are collected; GC goes on past them.
func (m *Kuberuntime) GarbageCollect(ctx context.Context, pods kubecontainer.PodStateProvider) error {
	return m.collect(ctx, "", pods)
}

// GarbageCollectPod is GarbageCollect of one pod's content only: what a
// delete of the pod leaves, collected without listing the node's other pods
// (a collection of all of them after each delete of a node's 1,000 would be
// a million objects looked at).
func (m *Kuberuntime) GarbageCollectPod(ctx context.Context, uid string, pods kubecontainer.PodStateProvider) error {
	return m.collect(ctx, uid, pods)
}

// collect collects the content of the pod only, or of every pod when only is
// empty.
func (m *Kuberuntime) collect(ctx context.Context, only string, pods kubecontainer.PodStateProvider) error {
	var errs []error
	now := m.cfg.Clock.Now()
	var sf *runtimeapi.PodSandboxFilter
	var cf *runtimeapi.ContainerFilter
	if only != "" {
		sf = &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{kubecontainer.LabelPodUID: only}}
		cf = &runtimeapi.ContainerFilter{LabelSelector: map[string]string{kubecontainer.LabelPodUID: only}}
	}
	sandboxes, err := m.rt.ListPodSandbox(ctx, sf)
	if err != nil {
		return fmt.Errorf("gc: list sandboxes: %w", err)
	}
	containers, err := m.rt.ListContainers(ctx, cf)
	if err != nil {
		return fmt.Errorf("gc: list containers: %w", err)
	}
	gone := func(uid string) bool { return (only == "" || uid == only) && pods.ShouldPodContentBeRemoved(uid) }

	// 1. Containers, grouped by pod and container name, newest first.
	type key struct{ uid, name string }
	groups := map[key][]*runtimeapi.Container{}
	for _, c := range containers {
		uid := c.Labels[kubecontainer.LabelPodUID]
		if uid == "" {
			continue
		}
		k := key{uid, c.Labels[kubecontainer.LabelContainerName]}
		groups[k] = append(groups[k], c)
	}
	remaining := map[string]int{} // containers left per sandbox
	left := map[string]bool{}     // pods with a container or a sandbox left
	var doomed []*runtimeapi.Container
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
			doomed = append(doomed, c)
		}
	}
	byPod := map[string][]*runtimeapi.PodSandbox{}
	for _, s := range sandboxes {
		if uid := sandboxPodUID(s); uid != "" {
			byPod[uid] = append(byPod[uid], s)
		}
	}
	sandboxRemovable := func(uid string, i int, s *runtimeapi.PodSandbox) bool {
		return s.State != runtimeapi.PodSandboxState_SANDBOX_READY && remaining[s.Id] == 0 && (gone(uid) || i > 0)
	}

	// The facts of what goes must be stored first.
	touched := map[string]kubecontainer.PodRef{}
	for _, c := range doomed {
		touched[c.Labels[kubecontainer.LabelPodUID]] = kubecontainer.PodRef{UID: c.Labels[kubecontainer.LabelPodUID], Namespace: c.Labels[kubecontainer.LabelPodNamespace], Name: c.Labels[kubecontainer.LabelPodName]}
	}
	for uid, ss := range byPod {
		slices.SortStableFunc(ss, newestSandboxFirst)
		for i, s := range ss {
			if sandboxRemovable(uid, i, s) {
				md := s.GetMetadata()
				touched[uid] = kubecontainer.PodRef{UID: uid, Namespace: md.GetNamespace(), Name: md.GetName()}
			}
		}
	}
	unrecorded, err := m.storeFacts(ctx, touched)
	if err != nil {
		errs = append(errs, err)
	}

	// 1. Containers.
	for _, c := range doomed {
		uid, name := c.Labels[kubecontainer.LabelPodUID], c.Labels[kubecontainer.LabelContainerName]
		if unrecorded[uid] {
			remaining[c.PodSandboxId]++
			left[uid] = true
			continue
		}
		if err := m.rt.RemoveContainer(ctx, c.Id); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
			remaining[c.PodSandboxId]++
			left[uid] = true
			continue
		}
		rc, _ := strconv.Atoi(c.Annotations[kubecontainer.AnnotationContainerRestartCount])
		ns, podName := c.Labels[kubecontainer.LabelPodNamespace], c.Labels[kubecontainer.LabelPodName]
		_ = containerlogs.Remove(filepath.Join(podLogsDir(m.cfg.LogDir, ns, podName, uid), containerLogPath(name, rc)))
		_ = os.Remove(m.terminationMessageFile(uid, name, rc))
		in := kubecontainer.Instance{Container: name, ID: c.Id, SandboxID: c.PodSandboxId, Attempt: c.GetMetadata().GetAttempt()}
		m.containerEvent(ctx, kubecontainer.PodRef{UID: uid, Namespace: ns, Name: podName}, in, schemas.EventContainerRemoved, "", "garbage collected")
	}

	// 2. Sandboxes, newest first per pod.
	for uid, ss := range byPod {
		for i, s := range ss {
			if unrecorded[uid] || !sandboxRemovable(uid, i, s) {
				left[uid] = true
				continue
			}
			if err := m.rt.RemovePodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove sandbox %s: %w", s.Id, err))
				left[uid] = true
				continue
			}
			md := s.GetMetadata()
			m.sandboxEvent(ctx, kubecontainer.PodRef{UID: uid, Namespace: md.GetNamespace(), Name: md.GetName()}, schemas.EventSandboxRemoved, s.Id, md.GetAttempt(), "garbage collected")
		}
	}

	// 3. Directories of gone pods with nothing left: logs, then data (emptyDirs,
	// their tmpfs unmounted first).
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
			if err := m.tearDownEmptyDirs(uid); err != nil {
				errs = append(errs, err)
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

// factsFlushTimeout bounds the wait for the facts of what GC removes to be
// stored; past it GC leaves those pods for a later collection.
const factsFlushTimeout = 30 * time.Second

// storeFacts emits every fact of the pods and waits until they are stored. It
// returns the pods whose facts are not known to be stored.
func (m *Kuberuntime) storeFacts(ctx context.Context, pods map[string]kubecontainer.PodRef) (unrecorded map[string]bool, err error) {
	unrecorded = map[string]bool{}
	if len(pods) == 0 {
		return unrecorded, nil
	}
	var errs []error
	for uid, ref := range pods {
		st, err := m.GetPodStatus(ctx, uid, ref.Name, ref.Namespace)
		if err != nil {
			unrecorded[uid] = true
			errs = append(errs, fmt.Errorf("gc: status of pod %s, whose facts go before its content: %w", uid, err))
			continue
		}
		for _, ev := range kubecontainer.PodFacts(m.cfg.NodeName, st) {
			m.emit.Emit(ctx, ev)
		}
	}
	if f, ok := m.emit.(kubecontainer.Flusher); ok {
		flushCtx, cancel := context.WithTimeout(ctx, factsFlushTimeout)
		defer cancel()
		if err := f.Flush(flushCtx); err != nil {
			for uid := range pods {
				unrecorded[uid] = true
			}
			errs = append(errs, fmt.Errorf("gc: facts of what it would remove not stored; removing nothing: %w", err))
		}
	}
	return unrecorded, errors.Join(errs...)
}
