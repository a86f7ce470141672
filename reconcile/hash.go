package reconcile

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// HashContainer is the hash of a container's spec kept in the
// io.kubernetes.container.hash annotation: a running container whose hash
// differs from its spec's is restarted, whatever the restart policy.
//
// Unlike current kubelet, which hashes only name and image (the rest of a pod
// spec is immutable in Kubernetes), jetlet hashes the whole container, since an
// intent may change any field. The hash is FNV-1a 64 over the container's JSON,
// in hexadecimal.
func HashContainer(c *corev1.Container) string {
	h := fnv.New64a()
	b, _ := json.Marshal(c) // a Container always marshals
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}
