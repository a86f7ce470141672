package reconcile

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/runtime/crilabels"
)

// newSandboxLabels: the pod's labels plus kubelet's identity labels.
func newSandboxLabels(pod *corev1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[crilabels.LabelPodName] = pod.Name
	labels[crilabels.LabelPodNamespace] = pod.Namespace
	labels[crilabels.LabelPodUID] = string(pod.UID)
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
		crilabels.LabelPodName:       pod.Name,
		crilabels.LabelPodNamespace:  pod.Namespace,
		crilabels.LabelPodUID:        string(pod.UID),
		crilabels.LabelContainerName: c.Name,
	}
}

func newContainerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int, isInit bool) map[string]string {
	ann := make(map[string]string, len(pod.Annotations)+8)
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	ann[crilabels.AnnotationContainerHash] = HashContainer(c)
	ann[crilabels.AnnotationContainerRestartCount] = strconv.Itoa(restartCount)
	ann[crilabels.AnnotationContainerTerminationMessagePath] = c.TerminationMessagePath
	ann[crilabels.AnnotationContainerTerminationMessagePolicy] = string(c.TerminationMessagePolicy)
	if pod.DeletionGracePeriodSeconds != nil {
		ann[crilabels.AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	ann[crilabels.AnnotationPodTerminationGracePeriod] = strconv.FormatInt(podGracePeriod(pod), 10)
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			ann[crilabels.AnnotationContainerPorts] = string(b)
		}
	}
	if h, ok := preStopAnnotation(c); ok {
		ann[crilabels.AnnotationContainerPreStopHandler] = h
	}
	if isInit {
		ann[crilabels.AnnotationContainerInit] = "true"
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
