package nodeservice

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/schemas"
)

// instance is one container instance a request resolved to.
type instance struct {
	id, pod, name string // pod is NS/NAME, name the container's
	uid, sandbox  string // the pod's
	state         runtimeapi.ContainerState
	logPath       string
}

// resolve finds the instance ref names: the pod's newest incarnation
// unless ref has a uid, its only container unless ref names one, and of
// that container's instances the newest, or with previous its last
// termination, as kubelet has it: the one before the newest, or the newest
// itself while it waits to be restarted (a crash loop in back-off, whose
// older instances the container GC removes).
func (s *Service) resolve(ctx context.Context, ref schemas.PodRef, previous bool) (instance, error) {
	pod := ref.Namespace + "/" + ref.Name
	cs, uid, err := s.newestPod(ctx, ref)
	if err != nil {
		return instance{}, err
	}
	name := ref.Container
	if name == "" {
		var names []string
		for _, c := range cs {
			if n := c.Labels[crilabels.LabelContainerName]; !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if len(names) > 1 {
			slices.Sort(names)
			return instance{}, replyErrorf(schemas.ServiceErrBadRequest, "pod %s has containers %s: name one (-c)", pod, strings.Join(names, ", "))
		}
		name = names[0]
	}
	cs = slices.DeleteFunc(cs, func(c *runtimeapi.Container) bool { return c.Labels[crilabels.LabelContainerName] != name })
	i := 0
	if previous {
		i = 1
		if len(cs) > 0 && cs[0].State == runtimeapi.ContainerState_CONTAINER_EXITED && s.cfg.WillRestart != nil {
			st, err := s.rt.ContainerStatus(ctx, cs[0].Id, false)
			if err == nil && s.cfg.WillRestart(uid, name, st.GetStatus().GetExitCode()) {
				i = 0
			}
		}
	}
	switch {
	case len(cs) == 0:
		return instance{}, replyErrorf(schemas.ServiceErrNotFound, "pod %s has no container %s", pod, name)
	case len(cs) <= i:
		return instance{}, replyErrorf(schemas.ServiceErrNotFound, "container %s of pod %s has no previous instance", name, pod)
	}
	st, err := s.rt.ContainerStatus(ctx, cs[i].Id, false)
	if errors.Is(err, crierr.ErrNotFound) {
		return instance{}, replyErrorf(schemas.ServiceErrNotFound, "container %s of pod %s was removed", name, pod)
	}
	if err != nil {
		return instance{}, err
	}
	return instance{id: cs[i].Id, pod: pod, name: name, uid: uid, sandbox: cs[i].PodSandboxId, state: st.GetStatus().GetState(), logPath: st.GetStatus().GetLogPath()}, nil
}

// newestPod lists the containers of the pod ref names, of its newest
// incarnation unless ref has a uid, newest first, and that pod's uid.
func (s *Service) newestPod(ctx context.Context, ref schemas.PodRef) (cs []*runtimeapi.Container, uid string, err error) {
	pod := ref.Namespace + "/" + ref.Name
	labels := map[string]string{crilabels.LabelPodNamespace: ref.Namespace, crilabels.LabelPodName: ref.Name}
	if ref.UID != "" {
		labels[crilabels.LabelPodUID] = ref.UID
	}
	cs, err = s.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: labels})
	if err != nil {
		return nil, "", err
	}
	if len(cs) == 0 {
		return nil, "", replyErrorf(schemas.ServiceErrNotFound, "pod %s has no container on this node", pod)
	}
	// Newest first: the newest pod's containers, then each one's newest
	// instance, come first.
	slices.SortFunc(cs, func(a, b *runtimeapi.Container) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.GetMetadata().GetAttempt(), a.GetMetadata().GetAttempt()))
	})
	uid = cs[0].Labels[crilabels.LabelPodUID]
	return slices.DeleteFunc(cs, func(c *runtimeapi.Container) bool { return c.Labels[crilabels.LabelPodUID] != uid }), uid, nil
}
