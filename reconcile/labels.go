package reconcile

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// newSandboxLabels: the pod's labels plus kubelet's identity labels.
func newSandboxLabels(pod *corev1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[kubecontainer.LabelPodName] = pod.Name
	labels[kubecontainer.LabelPodNamespace] = pod.Namespace
	labels[kubecontainer.LabelPodUID] = string(pod.UID)
	return labels
}

func newSandboxAnnotations(pod *corev1.Pod) map[string]string {
	ann := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	return ann
}

// newContainerLabels: only the identity labels, as kubelet (pod labels go on
// the sandbox).
func newContainerLabels(pod *corev1.Pod, c *corev1.Container) map[string]string {
	return map[string]string{
		kubecontainer.LabelPodName:       pod.Name,
		kubecontainer.LabelPodNamespace:  pod.Namespace,
		kubecontainer.LabelPodUID:        string(pod.UID),
		kubecontainer.LabelContainerName: c.Name,
	}
}

func newContainerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int, isInit bool) map[string]string {
	ann := make(map[string]string, len(pod.Annotations)+8)
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	ann[kubecontainer.AnnotationContainerHash] = HashContainer(c)
	ann[kubecontainer.AnnotationContainerRestartCount] = strconv.Itoa(restartCount)
	ann[kubecontainer.AnnotationContainerTerminationMessagePath] = c.TerminationMessagePath
	ann[kubecontainer.AnnotationContainerTerminationMessagePolicy] = string(c.TerminationMessagePolicy)
	if pod.DeletionGracePeriodSeconds != nil {
		ann[kubecontainer.AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	ann[kubecontainer.AnnotationPodTerminationGracePeriod] = strconv.FormatInt(podGracePeriod(pod), 10)
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			ann[kubecontainer.AnnotationContainerPorts] = string(b)
		}
	}
	if h, ok := preStopAnnotation(c); ok {
		ann[kubecontainer.AnnotationContainerPreStopHandler] = h
	}
	if isInit {
		ann[kubecontainer.AnnotationContainerInit] = "true"
	}
	return ann
}

// podGracePeriod: the pod's terminationGracePeriodSeconds, else the API
// default of 30 s (intents are not defaulted by an API server).
func podGracePeriod(pod *corev1.Pod) int64 {
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return defaultTerminationGracePeriod
}

const defaultTerminationGracePeriod = 30

func annotationInt(ann map[string]string, key string) (int64, bool) {
	v, ok := ann[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
