package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// applyDefaultImageTag adds ":latest" to an image with neither tag nor digest.
func applyDefaultImageTag(image string) string {
	if strings.Contains(image, "@") {
		return image
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if strings.Contains(last, ":") {
		return image
	}
	return image + ":latest"
}

// pullPolicy is the container's policy, defaulted as the API server does:
// Always when the tag is "latest" (an image with neither tag nor digest has
// tag latest; "img:latest@sha256:..." too), else IfNotPresent.
func pullPolicy(c *corev1.Container) corev1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if imageTag(c.Image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// imageTag is the image's tag: "latest" when there is neither tag nor digest,
// "" for a digest without a tag.
func imageTag(image string) string {
	name, _, hasDigest := strings.Cut(image, "@")
	last := name[strings.LastIndex(name, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	if hasDigest {
		return ""
	}
	return "latest"
}

// ensureImageExists makes the container's image present per its pull policy,
// after kubelet's image manager: ImageStatus first; pull when the policy says
// so; failed pulls back off per pod and image.
func (s *podOperation) ensureImageExists(ctx context.Context, c *corev1.Container) (string, string, error) {
	m, pod := s.m, s.pod
	image := applyDefaultImageTag(c.Image)
	spec := &runtimeapi.ImageSpec{Image: image}
	resp, err := m.rt.ImageStatus(ctx, spec, false)
	if err != nil && !isNotFound(err) {
		return "", fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err), kubecontainer.ErrImageInspect
	}
	img := resp.GetImage() // nil when absent
	present := img != nil
	policy := pullPolicy(c)
	pull := policy == corev1.PullAlways || (policy == corev1.PullIfNotPresent && !present)
	if !pull {
		if present {
			return imageRef(img, image), "", nil
		}
		return "", fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image), kubecontainer.ErrImageNeverPull
	}

	key := string(pod.UID) + "_" + image
	now := m.cfg.Clock.Now()
	if m.imageBackOff.IsInBackOffSinceUpdate(key, now) {
		return "", fmt.Sprintf("Back-off pulling image %q", c.Image), kubecontainer.ErrImagePullBackOff
	}
	ref, err := m.pullImage(ctx, spec, s.sandboxCfg, s.pullCredentials(image))
	ev := kubecontainer.NewEvent(m.cfg.NodeName, s.ref, schemas.EventImagePulled, "", m.cfg.Clock.Now())
	ev.Container = c.Name
	if err != nil {
		m.imageBackOff.Next(key, m.cfg.Clock.Now())
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		s.result.Fail(schemas.ActionPullImage, c.Name, kubecontainer.ErrImagePull, msg)
		ev.Type = schemas.EventImagePullFailed
		ev.ID = hashID(string(pod.UID), c.Name, image, strconv.FormatInt(now.UnixNano(), 10)) + "." + string(ev.Type)
		ev.Reason, ev.Message = kubecontainer.ErrImagePull.Error(), msg
		m.emit.Emit(ctx, ev)
		return "", msg, kubecontainer.ErrImagePull
	}
	s.result.Add(schemas.ActionPullImage, c.Name, image)
	m.imageBackOff.GC()
	ev.ID = hashID(string(pod.UID), c.Name, image, ref) + "." + string(ev.Type)
	ev.Message = fmt.Sprintf("Successfully pulled image %q", c.Image)
	m.emit.Emit(ctx, ev)
	return ref, "", nil
}

// Credentials gives the node's registry credentials for an image, in the
// order to try them (kubelet's DockerKeyring.Lookup): the node's (jetlet run
// --image-credentials), tried after the pod's imagePullSecrets.
// Implementations must be safe for concurrent use.
type Credentials interface {
	Lookup(image string) []*runtimeapi.AuthConfig
}

// NoCredentials pulls without credentials: the runtime's own registry
// configuration applies.
type NoCredentials struct{}

// Lookup implements Credentials.
func (NoCredentials) Lookup(string) []*runtimeapi.AuthConfig { return nil }

// pullImage pulls with each credential in turn until one works, as
// kubelet's PullImage; without any, it pulls anonymously. The errors joined
// are the runtime's, which never quote the AuthConfig sent, and nothing here
// logs one.
func (m *Kuberuntime) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, sandboxCfg *runtimeapi.PodSandboxConfig, creds []*runtimeapi.AuthConfig) (string, error) {
	if len(creds) == 0 {
		return m.rt.PullImage(ctx, spec, nil, sandboxCfg)
	}
	var errs []error
	for _, auth := range creds {
		ref, err := m.rt.PullImage(ctx, spec, auth, sandboxCfg)
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return "", errs[0]
	}
	return "", pullErrors(errs)
}

// pullErrors are the failures of one pull tried with several credentials,
// on one line (an error message goes into results and events).
type pullErrors []error

func (p pullErrors) Error() string {
	msgs := make([]string, len(p))
	for i, err := range p {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (p pullErrors) Unwrap() []error { return p }

func imageRef(img *runtimeapi.Image, fallback string) string {
	if img.Id != "" {
		return img.Id
	}
	return fallback
}

func podRefOf(pod *corev1.Pod) kubecontainer.PodRef {
	return kubecontainer.PodRef{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name}
}
