// Package crilabels holds the label and annotation keys jetlet puts on the
// CRI sandboxes and containers it creates: kubelet's, so that tools that know
// a kubelet's containers (crictl, log collectors) know jetlet's. reconcile
// writes them; the node service finds a pod's containers by them.
package crilabels

// The keys, kubelet's but for AnnotationContainerInit.
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
