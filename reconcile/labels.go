package reconcile

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Label and annotation keys, the same as kubelet's, so that tools that know a
// kubelet's containers (crictl, log collectors) know jetlet's.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash                     = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationContainerTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationContainerTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationContainerPorts                    = "io.kubernetes.container.ports"
	AnnotationPodDeletionGracePeriod            = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod         = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerPreStopHandler           = "io.kubernetes.container.preStopHandler"
	// AnnotationContainerInit marks init containers (jetlet's own; kubelet
	// tells them apart by the pod spec, which a restarted jetlet may lack).
	AnnotationContainerInit = "jetlet.dev/init-container"
)

// newSandboxLabels: the pod's labels plus kubelet's identity labels.
func newSandboxLabels(pod *corev1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
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
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

func newContainerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int, isInit bool) map[string]string {
	ann := make(map[string]string, len(pod.Annotations)+8)
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	ann[AnnotationContainerHash] = HashContainer(c)
	ann[AnnotationContainerRestartCount] = strconv.Itoa(restartCount)
	ann[AnnotationContainerTerminationMessagePath] = c.TerminationMessagePath
	ann[AnnotationContainerTerminationMessagePolicy] = string(c.TerminationMessagePolicy)
	if pod.DeletionGracePeriodSeconds != nil {
		ann[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	ann[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(podGracePeriod(pod), 10)
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			ann[AnnotationContainerPorts] = string(b)
		}
	}
	if h, ok := preStopAnnotation(c); ok {
		ann[AnnotationContainerPreStopHandler] = h
	}
	if isInit {
		ann[AnnotationContainerInit] = "true"
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
