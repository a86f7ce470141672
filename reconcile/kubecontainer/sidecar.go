package kubecontainer

import corev1 "k8s.io/api/core/v1"

// IsSidecar: an init container with restartPolicy Always, which runs beside
// the app containers (kubelet's IsRestartableInitContainer).
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
