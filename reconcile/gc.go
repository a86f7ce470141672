package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/mountinfo"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/runtime/crilabels"
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
//  3. Pod directories (logs, emptyDir volumes) and pod cgroups of pods that
//     are gone and have no sandbox left.
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
// empty: it lists, plans (planGC), stores the facts of what goes, and acts.
func (m *Kuberuntime) collect(ctx context.Context, only string, pods kubecontainer.PodStateProvider) error {
	now := m.cfg.Clock.Now()
	sandboxes, containers, err := m.listForGC(ctx, only)
	if err != nil {
		return err
	}
	gone := func(uid string) bool { return (only == "" || uid == only) && pods.ShouldPodContentBeRemoved(uid) }
	plan := planGC(sandboxes, containers, gone, m.cfg.GC, now)

	// The facts of what goes must be stored first.
	var errs []error
	unrecorded, err := m.storeFacts(ctx, plan.facts)
	if err != nil {
		errs = append(errs, err)
	}
	left, removeErrs := m.removeDead(ctx, plan, unrecorded)
	errs = append(errs, removeErrs...)
	errs = append(errs, m.removePodDirs(gone, left)...)
	if err := m.removeGoneCgroups(ctx, gone, left); err != nil {
		errs = append(errs, fmt.Errorf("gc: %w", err))
	}
	m.backOff.GC()
	m.imageBackOff.GC()
	return errors.Join(errs...)
}

// listForGC lists the sandboxes and containers of the pod only, or of every
// pod when only is empty.
func (m *Kuberuntime) listForGC(ctx context.Context, only string) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	var sf *runtimeapi.PodSandboxFilter
	var cf *runtimeapi.ContainerFilter
	if only != "" {
		sf = &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{crilabels.LabelPodUID: only}}
		cf = &runtimeapi.ContainerFilter{LabelSelector: map[string]string{crilabels.LabelPodUID: only}}
	}
	sandboxes, err := m.rt.ListPodSandbox(ctx, sf)
	if err != nil {
		return nil, nil, fmt.Errorf("gc: list sandboxes: %w", err)
	}
	containers, err := m.rt.ListContainers(ctx, cf)
	if err != nil {
		return nil, nil, fmt.Errorf("gc: list containers: %w", err)
	}
	return sandboxes, containers, nil
}

// removeDead removes what plan says, containers first (each with its log and
// termination message files), then sandboxes; nothing of a pod whose facts
// are unrecorded, and no sandbox that keeps a container. It returns the pods
// that keep a container or a sandbox.
func (m *Kuberuntime) removeDead(ctx context.Context, plan gcPlan, unrecorded map[string]bool) (left map[string]bool, errs []error) {
	left = maps.Clone(plan.left)
	kept := map[string]bool{} // sandboxes with a container left
	for _, c := range plan.containers {
		uid, name := c.Labels[crilabels.LabelPodUID], c.Labels[crilabels.LabelContainerName]
		if !unrecorded[uid] {
			err := m.rt.RemoveContainer(ctx, c.Id)
			if err == nil || isNotFound(err) {
				rc, _ := strconv.Atoi(c.Annotations[crilabels.AnnotationContainerRestartCount])
				ref := kubecontainer.PodRef{UID: uid, Namespace: c.Labels[crilabels.LabelPodNamespace], Name: c.Labels[crilabels.LabelPodName]}
				_ = containerlogs.Remove(filepath.Join(podLogsDir(m.cfg.LogDir, ref.Namespace, ref.Name, uid), containerLogPath(name, rc)))
				_ = os.Remove(m.terminationMessageFile(uid, name, rc))
				in := kubecontainer.Instance{Container: name, ID: c.Id, SandboxID: c.PodSandboxId, Attempt: c.GetMetadata().GetAttempt()}
				m.containerEvent(ctx, ref, in, schemas.EventContainerRemoved, "", "garbage collected")
				continue
			}
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.Id, err))
		}
		kept[c.PodSandboxId] = true
		left[uid] = true
	}
	for _, s := range plan.sandboxes {
		uid := sandboxPodUID(s)
		if unrecorded[uid] || kept[s.Id] {
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
	return left, errs
}

// removePodDirs removes the directories of gone pods with nothing left:
// logs, then data (volumes, their subPath binds and tmpfs unmounted first;
// nothing while a mount is left in it), and forgets the pods.
func (m *Kuberuntime) removePodDirs(gone func(uid string) bool, left map[string]bool) (errs []error) {
	if entries, err := os.ReadDir(m.cfg.LogDir); err == nil {
		for _, e := range entries {
			parts := strings.Split(e.Name(), "_")
			if !e.IsDir() || len(parts) != 3 || left[parts[2]] || !gone(parts[2]) {
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
			if err := m.tearDownVolumes(uid); err != nil {
				errs = append(errs, err)
				continue
			}
			// A removal never goes through a mount: it would empty the
			// volume (or the host's directory) bound there.
			// A walk of the pod's dir, not a read of every mount of the
			// node for each pod deleted.
			mount, err := mountinfo.FirstUnder(m.podDataDir(uid))
			if err == nil && mount != "" {
				err = fmt.Errorf("pod %s: data dir kept, mounts left in it: %s", uid, mount)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if err := os.RemoveAll(m.podDataDir(uid)); err != nil {
				errs = append(errs, err)
				continue
			}
			m.userns.Release(uid)
			m.cache.forget(uid)
			m.podResources.forget(uid)
			m.reasons.forgetPod(uid)
		}
	}
	return errs
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
