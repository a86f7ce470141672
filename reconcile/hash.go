package reconcile

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// HashContainer is the hash of a container's spec kept in the
// io.kubernetes.container.hash annotation: a running container whose hash
// differs from its spec's is restarted, whatever the restart policy.
//
// Unlike current kubelet, which hashes only name and image (the rest of a pod
// spec is immutable in Kubernetes), jetlet hashes the whole container, since an
// intent may change any field; but, as kubelet's hash with
// InPlacePodVerticalScaling, not its resources and resizePolicy: a change of
// resources is a resize (ComputePodActions), not a restart. The hash is
// FNV-1a 64 over the container's JSON, in hexadecimal.
func HashContainer(c *corev1.Container) string {
	without := *c
	without.Resources, without.ResizePolicy = corev1.ResourceRequirements{}, nil
	return hashJSON(&without)
}

// legacyHashContainer is the hash jetlet gave containers before in-place
// resize: the whole container, resources included. A container created then
// whose spec is unchanged matches it, and is adopted without a restart.
func legacyHashContainer(c *corev1.Container) string { return hashJSON(c) }

func hashJSON(c *corev1.Container) string {
	h := fnv.New64a()
	b, _ := json.Marshal(c) // a Container always marshals
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// containerChanged reports whether the running instance cs was created from
// another spec than c, resources aside: its hash is neither c's nor (an
// instance of a jetlet before in-place resize) c's legacy one.
func containerChanged(c *corev1.Container, cs *kubecontainer.ContainerStatus) bool {
	return cs.Hash != HashContainer(c) && cs.Hash != legacyHashContainer(c)
}
