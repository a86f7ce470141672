package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/pullmanager"
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
// after kubelet's image manager: ImageStatus first (not for Always); an
// image present is the pod's to use only if the pull records say it may
// (ImagePullRecords: it was pulled with the node's credentials or none, or
// with a pull secret the pod has too, or the policy does not verify it);
// otherwise the pod pulls it with its own credentials, and under Never it
// fails as if the image were absent, which does not tell it the image is
// there. Failed pulls back off per pod and image.
func (s *podOperation) ensureImageExists(ctx context.Context, c *corev1.Container) (string, string, error) {
	m, pod := s.m, s.pod
	image := applyDefaultImageTag(c.Image)
	spec := &runtimeapi.ImageSpec{Image: image}
	policy := pullPolicy(c)
	neverPullMsg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
	var present string // the image's ref when present
	if policy != corev1.PullAlways {
		resp, err := m.rt.ImageStatus(ctx, spec, false)
		if err != nil && !isNotFound(err) {
			return "", fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err), kubecontainer.ErrImageInspect
		}
		if img := resp.GetImage(); img != nil { // nil when absent
			present = imageRef(img, image)
		}
	}
	if present == "" && policy == corev1.PullNever {
		return "", neverPullMsg, kubecontainer.ErrImageNeverPull
	}
	// The pod's pull secrets are read once, when first needed.
	creds := sync.OnceValue(func() []pullCredential { return s.pullCredentials(image) })
	if present != "" {
		podSecrets := func() []pullmanager.ImagePullSecret { return podPullSecrets(creds()) }
		if !m.cfg.ImagePulls.MustAttemptImagePull(c.Image, present, podSecrets) {
			return present, "", nil
		}
		if policy == corev1.PullNever {
			return "", neverPullMsg, kubecontainer.ErrImageNeverPull
		}
	}

	key := string(pod.UID) + "_" + image
	now := m.cfg.Clock.Now()
	if m.imageBackOff.IsInBackOffSinceUpdate(key, now) {
		return "", fmt.Sprintf("Back-off pulling image %q", c.Image), kubecontainer.ErrImagePullBackOff
	}
	if err := m.cfg.ImagePulls.RecordPullIntent(c.Image); err != nil {
		msg := fmt.Sprintf("Failed to record image pull intent for container image %q: %v", c.Image, err)
		s.result.Fail(schemas.ActionPullImage, c.Name, kubecontainer.ErrImagePull, msg)
		return "", msg, kubecontainer.ErrImagePull
	}
	ref, used, err := m.pullImage(ctx, spec, s.sandboxCfg, creds())
	ev := kubecontainer.NewEvent(m.cfg.NodeName, s.ref, schemas.EventImagePulled, "", m.cfg.Clock.Now())
	ev.Container = c.Name
	if err != nil {
		m.cfg.ImagePulls.RecordImagePullFailed(c.Image)
		m.imageBackOff.Next(key, m.cfg.Clock.Now())
		msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, err)
		s.result.Fail(schemas.ActionPullImage, c.Name, kubecontainer.ErrImagePull, msg)
		ev.Type = schemas.EventImagePullFailed
		ev.ID = hashID(string(pod.UID), c.Name, image, strconv.FormatInt(now.UnixNano(), 10)) + "." + string(ev.Type)
		ev.Reason, ev.Message = kubecontainer.ErrImagePull.Error(), msg
		m.emit.Emit(ctx, ev)
		return "", msg, kubecontainer.ErrImagePull
	}
	m.cfg.ImagePulls.RecordImagePulled(c.Image, ref, used.recorded())
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

// ImagePullRecords keeps what credentials pulled each image
// (pullmanager.Manager, kubelet's ImagePullManager). image is the
// container's image as written; imageRef the runtime's image ID.
// Implementations must be safe for concurrent use.
type ImagePullRecords interface {
	// MustAttemptImagePull: a pod with podSecrets' secrets must pull
	// image, present as imageRef, before it may use it. podSecrets is
	// called only when the answer depends on them.
	MustAttemptImagePull(image, imageRef string, podSecrets func() []pullmanager.ImagePullSecret) bool
	RecordPullIntent(image string) error
	// RecordImagePulled records a pull that worked with creds.
	RecordImagePulled(image, imageRef string, creds *pullmanager.ImagePullCredentials)
	RecordImagePullFailed(image string)
}

// NoCredentials pulls without credentials: the runtime's own registry
// configuration applies.
type NoCredentials struct{}

// Lookup implements Credentials.
func (NoCredentials) Lookup(string) []*runtimeapi.AuthConfig { return nil }

// pullImage pulls with each credential in turn until one works, as
// kubelet's PullImage, and says which one did (nil: none was needed);
// without any, it pulls anonymously. The errors joined are the runtime's,
// which never quote the AuthConfig sent, and nothing here logs one.
func (m *Kuberuntime) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, sandboxCfg *runtimeapi.PodSandboxConfig, creds []pullCredential) (string, *pullCredential, error) {
	if len(creds) == 0 {
		ref, err := m.rt.PullImage(ctx, spec, nil, sandboxCfg)
		return ref, nil, err
	}
	var errs []error
	for i, c := range creds {
		ref, err := m.rt.PullImage(ctx, spec, c.auth, sandboxCfg)
		if err == nil {
			return ref, &creds[i], nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return "", nil, errs[0]
	}
	return "", nil, pullErrors(errs)
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
