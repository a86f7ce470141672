package admission

import (
	corev1 "k8s.io/api/core/v1"
)

// PodQOS is the pod's QoS class, kubelet's GetPodQOS
// (pkg/apis/core/v1/helper/qos): the status's if set, else computed.
func PodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return computePodQOS(pod)
}

// computePodQOS is kubelet's ComputePodQOS: BestEffort when no container asks
// for cpu or memory, Guaranteed when every container's cpu and memory
// requests equal their limits, Burstable otherwise. Pod-level resources,
// where set, decide alone (the PodLevelResources feature, on by default).
func computePodQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Spec.Resources != nil {
		return requirementsQOS(pod.Spec.Resources)
	}
	var podQOS corev1.PodQOSClass
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			qos := requirementsQOS(&containers[i].Resources)
			switch {
			case qos == corev1.PodQOSBurstable:
				return qos
			case podQOS == "":
				podQOS = qos
			case podQOS != qos:
				// One BestEffort container and one Guaranteed.
				return corev1.PodQOSBurstable
			}
		}
	}
	if podQOS == "" {
		return corev1.PodQOSBestEffort
	}
	return podQOS
}

// qosComputeResources are the resources QoS is decided by.
var qosComputeResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// requirementsQOS is kubelet's resourceQOS, the class of one set of
// requirements: BestEffort with no cpu or memory, Guaranteed with both
// requested at their limits, Burstable with anything else.
func requirementsQOS(resources *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(resources.Requests) == 0 && len(resources.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var qos corev1.PodQOSClass
	for _, name := range qosComputeResources {
		request, limit := resources.Requests[name], resources.Limits[name]
		if !request.Equal(limit) {
			return corev1.PodQOSBurstable
		}
		bestEffort := request.IsZero()
		switch {
		case qos == "" && bestEffort:
			qos = corev1.PodQOSBestEffort
		case qos == "":
			qos = corev1.PodQOSGuaranteed
		case bestEffort != (qos == corev1.PodQOSBestEffort):
			// One of cpu and memory set, the other not.
			return corev1.PodQOSBurstable
		}
	}
	return qos
}
