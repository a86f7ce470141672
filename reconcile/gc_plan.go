package reconcile

import (
	"cmp"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
)

// gcPlan is what one collection removes, decided from what was listed and
// nothing else (planGC): a pure plan, acted on by removeDead and
// removePodDirs.
type gcPlan struct {
	// containers are the dead container instances to remove.
	containers []*runtimeapi.Container
	// sandboxes are the sandboxes to remove, newest first per pod, unless
	// one of their containers stays after all (its removal failed, or its
	// pod's facts could not be stored).
	sandboxes []*runtimeapi.PodSandbox
	// facts are the pods something is removed of, whose facts are stored
	// first.
	facts map[string]kubecontainer.PodRef
	// left are the pods that keep a container or a sandbox, whatever the
	// removals do: their directories stay.
	left map[string]bool
}

// planGC decides what GarbageCollect removes (see there) of the sandboxes
// and containers listed at now: gone says which pods are gone. Objects
// without a pod uid are not jetlet's and stay. Pods come in uid order.
func planGC(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, gone func(uid string) bool, policy GCPolicy, now time.Time) gcPlan {
	plan := gcPlan{facts: map[string]kubecontainer.PodRef{}, left: map[string]bool{}}
	remaining := map[string]int{} // containers kept per sandbox
	for _, g := range groupContainers(containers) {
		uid := g[0].Labels[crilabels.LabelPodUID]
		podGone := gone(uid)
		deadKept := 0
		for i, c := range g {
			evictable := c.State != runtimeapi.ContainerState_CONTAINER_RUNNING && now.Sub(time.Unix(0, c.CreatedAt)) >= policy.MinAge
			keep := !evictable
			if evictable && !podGone {
				protected := i == 0 // the newest instance, and it does not run
				if protected || policy.MaxPerPodContainer < 0 || deadKept < policy.MaxPerPodContainer {
					keep = true
					deadKept++
				}
			}
			if keep {
				remaining[c.PodSandboxId]++
				plan.left[uid] = true
				continue
			}
			plan.containers = append(plan.containers, c)
			plan.facts[uid] = kubecontainer.PodRef{UID: uid, Namespace: c.Labels[crilabels.LabelPodNamespace], Name: c.Labels[crilabels.LabelPodName]}
		}
	}
	for _, ss := range groupSandboxes(sandboxes) {
		uid := sandboxPodUID(ss[0])
		for i, s := range ss {
			if s.State == runtimeapi.PodSandboxState_SANDBOX_READY || remaining[s.Id] > 0 || !(gone(uid) || i > 0) {
				plan.left[uid] = true
				continue
			}
			plan.sandboxes = append(plan.sandboxes, s)
			md := s.GetMetadata()
			plan.facts[uid] = kubecontainer.PodRef{UID: uid, Namespace: md.GetNamespace(), Name: md.GetName()}
		}
	}
	return plan
}

// groupContainers groups the containers that have a pod uid by pod and
// container name, each group newest first, the groups in (uid, name) order.
func groupContainers(containers []*runtimeapi.Container) [][]*runtimeapi.Container {
	type key struct{ uid, name string }
	groups := map[key][]*runtimeapi.Container{}
	for _, c := range containers {
		if uid := c.Labels[crilabels.LabelPodUID]; uid != "" {
			k := key{uid, c.Labels[crilabels.LabelContainerName]}
			groups[k] = append(groups[k], c)
		}
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.name, b.name)) })
	out := make([][]*runtimeapi.Container, len(keys))
	for i, k := range keys {
		out[i] = groups[k]
		slices.SortStableFunc(out[i], newestContainerFirst)
	}
	return out
}

// groupSandboxes groups the sandboxes that have a pod uid by pod, each group
// newest first, the groups in uid order.
func groupSandboxes(sandboxes []*runtimeapi.PodSandbox) [][]*runtimeapi.PodSandbox {
	byPod := map[string][]*runtimeapi.PodSandbox{}
	for _, s := range sandboxes {
		if uid := sandboxPodUID(s); uid != "" {
			byPod[uid] = append(byPod[uid], s)
		}
	}
	uids := make([]string, 0, len(byPod))
	for uid := range byPod {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	out := make([][]*runtimeapi.PodSandbox, len(uids))
	for i, uid := range uids {
		out[i] = byPod[uid]
		slices.SortStableFunc(out[i], newestSandboxFirst)
	}
	return out
}
