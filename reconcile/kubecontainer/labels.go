package kubecontainer

// Label and annotation keys, the same as kubelet's, so that tools that know a
// kubelet's containers (crictl, log collectors) know jetlet's. reconcile puts
// them on every sandbox and container it creates; the node service finds a
// pod's containers by them.
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
