package schemas

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// SetPodDefaults fills in what the Kubernetes API server would before kubelet
// sees a pod: restartPolicy Always, terminationGracePeriodSeconds 30,
// dnsPolicy ClusterFirst, an empty pod securityContext, enableServiceLinks
// true, resource quantities rounded up to milli units, and for every container the pull policy, termination message, port,
// probe and handler defaults. A volume without a source becomes an emptyDir.
// A pod naming a system priority class without a priority gets the class's.
// It only fills empty fields, so applying it twice changes nothing.
func SetPodDefaults(pod *corev1.Pod) {
	spec := &pod.Spec
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := DefaultGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		t := true
		spec.EnableServiceLinks = &t
	}
	roundUpToMilli(spec.Overhead)
	if spec.Resources != nil {
		roundUpToMilli(spec.Resources.Limits)
		roundUpToMilli(spec.Resources.Requests)
	}
	setPriority(spec)
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.VolumeSource == (corev1.VolumeSource{}) {
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}
		if v.HostPath != nil && v.HostPath.Type == nil {
			t := corev1.HostPathUnset
			v.HostPath.Type = &t
		}
	}
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i], spec.HostNetwork)
	}
	setPodResourcesDefaults(pod)
}

// setPodResourcesDefaults fills in the pod-level resources as the API
// server's defaultHugePagePodLimits, defaultPodRequests and defaultPodLimits
// (feature PodLevelResources, after the containers' defaults), only where
// pod-level resources are partly given: a hugepages limit the containers'
// limits add up to; a cpu or memory request the containers' requests add
// up to, else each remaining request from its limit; a cpu or memory limit
// every app and init container sets, added up, when only requests are given.
func setPodResourcesDefaults(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || len(r.Limits) == 0 && len(r.Requests) == 0 {
		return
	}
	overcommit := func(name corev1.ResourceName) bool {
		return name == corev1.ResourceCPU || name == corev1.ResourceMemory
	}
	containerLimits := resourcehelper.AggregateContainerLimits(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range containerLimits {
		_, requested := r.Requests[name]
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !requested {
			setIfMissing(&r.Limits, name, q)
		}
	}
	if len(r.Limits) > 0 {
		for name, q := range resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{}) {
			if overcommit(name) {
				setIfMissing(&r.Requests, name, q)
			}
		}
		for name, q := range r.Limits {
			if resourcehelper.IsSupportedPodLevelResource(name) {
				setIfMissing(&r.Requests, name, q)
			}
		}
	}
	if !resourcehelper.IsPodLevelLimitsSet(pod) && resourcehelper.IsPodLevelRequestsSet(pod) {
		for name, q := range containerLimits {
			if overcommit(name) && everyContainerLimits(&pod.Spec, name) {
				setIfMissing(&r.Limits, name, q)
			}
		}
	}
}

// setIfMissing sets name in *list to q unless the list has it.
func setIfMissing(list *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if _, ok := (*list)[name]; ok {
		return
	}
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[name] = q.DeepCopy()
}

// everyContainerLimits reports whether every init and app container of s
// sets a limit of name.
func everyContainerLimits(s *corev1.PodSpec, name corev1.ResourceName) bool {
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}

func setContainerDefaults(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		if imageWantsAlwaysPull(c.Image) {
			c.ImagePullPolicy = corev1.PullAlways
		} else {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	roundUpToMilli(c.Resources.Limits)
	roundUpToMilli(c.Resources.Requests)
	// Limits given without requests are also the requests.
	for name, q := range c.Resources.Limits {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		if _, set := c.Resources.Requests[name]; !set {
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			setProbeDefaults(p)
		}
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil && h.HTTPGet != nil {
				setHTTPGetDefaults(h.HTTPGet)
			}
		}
	}
}

func setProbeDefaults(p *corev1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		setHTTPGetDefaults(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		s := ""
		p.GRPC.Service = &s
	}
}

func setHTTPGetDefaults(h *corev1.HTTPGetAction) {
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// imageWantsAlwaysPull reports whether an image reference has the tag
// "latest", or neither a tag nor a digest (which means "latest"): such an
// image can change under the same name, so the API server defaults its pull
// policy to Always.
func imageWantsAlwaysPull(image string) bool {
	name, _, digested := strings.Cut(image, "@")
	// A tag follows the last ':' after the last '/'; a ':' before it is a
	// registry port.
	last := name[strings.LastIndex(name, "/")+1:]
	i := strings.LastIndex(last, ":")
	if i < 0 {
		return !digested
	}
	return last[i+1:] == "latest"
}

// roundUpToMilli rounds every quantity up to a multiple of 0.001, as the API
// server does: finer quantities cannot be expressed to the runtime.
func roundUpToMilli(l corev1.ResourceList) {
	for name, q := range l {
		q.RoundUp(resource.Milli)
		l[name] = q
	}
}
