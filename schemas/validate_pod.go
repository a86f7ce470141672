package schemas

import corev1 "k8s.io/api/core/v1"

// validatePodSpec checks the spec of a pod for the node of want: the fields
// the node cannot honour, the pod-level fields, then the volumes and each
// container.
func validatePodSpec(e *errs, s *corev1.PodSpec, want IntentTarget) {
	rejectUnsupportedPodFields(e, s)
	validatePodLevelFields(e, s)
	validatePriority(e, s)
	validatePodResources(e, s)
	validateHostUsers(e, s, want.NoUserNamespaces)
	volumes := validateVolumes(e, s.Volumes, want.NoMemoryEmptyDir)

	if len(s.Containers) == 0 {
		e.invalid("pod.spec.containers", "at least one container is required")
	}
	names := map[string]bool{}
	for i := range s.InitContainers {
		validateContainer(e, idx("pod.spec.initContainers", i), &s.InitContainers[i], true, names, volumes, s)
	}
	for i := range s.Containers {
		validateContainer(e, idx("pod.spec.containers", i), &s.Containers[i], false, names, volumes, s)
	}
}

// rejectUnsupportedPodFields reports the pod-level fields this node cannot
// honour (docs/wire-protocol.md section 9).
func rejectUnsupportedPodFields(e *errs, s *corev1.PodSpec) {
	const p = "pod.spec"
	if len(s.EphemeralContainers) > 0 {
		e.unsupported(p+".ephemeralContainers", "ephemeral containers are added through the API server's ephemeralcontainers subresource, which this node does not have")
	}
	if len(s.ResourceClaims) > 0 {
		e.unsupported(p+".resourceClaims", "dynamic resource allocation needs the API server")
	}
	for i, r := range s.ImagePullSecrets {
		validateObjectName(e, idx(p+".imagePullSecrets", i)+".name", r.Name)
	}
	if s.OS != nil && s.OS.Name != corev1.Linux {
		e.unsupported(p+".os.name", "this node runs linux pods only")
	}
	if s.RuntimeClassName != nil {
		e.unsupported(p+".runtimeClassName", "this node has no RuntimeClasses: pods run with the runtime's default handler")
	}
	if len(s.Overhead) > 0 {
		e.unsupported(p+".overhead", "pod overhead comes from a RuntimeClass, which this node does not have")
	}
	if len(s.ReadinessGates) > 0 {
		e.unsupported(p+".readinessGates", "readiness gates are conditions set through the API server, which this node does not have")
	}
	if sc := s.SecurityContext; sc != nil {
		if sc.WindowsOptions != nil {
			e.unsupported(p+".securityContext.windowsOptions", "this node runs linux pods only")
		}
		if sc.SELinuxChangePolicy != nil {
			e.unsupported(p+".securityContext.seLinuxChangePolicy", "this node leaves SELinux relabelling of volumes to the runtime")
		}
	}
}

// validatePodLevelFields checks the pod-level fields the node honours:
// restart and DNS policy, grace period and deadline, hostname, security
// profiles and host namespaces.
func validatePodLevelFields(e *errs, s *corev1.PodSpec) {
	const p = "pod.spec"
	switch s.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		e.invalid(p+".restartPolicy", `must be "Always", "OnFailure" or "Never"`)
	}
	switch s.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone:
	default:
		e.invalid(p+".dnsPolicy", `must be "ClusterFirst", "ClusterFirstWithHostNet", "Default" or "None"`)
	}
	validateDNSConfig(e, s)
	validateHostAliases(e, s.HostAliases)
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		e.invalid(p+".terminationGracePeriodSeconds", "must be >= 0")
	}
	if d := s.ActiveDeadlineSeconds; d != nil && *d < 1 {
		e.invalid(p+".activeDeadlineSeconds", "must be a positive integer")
	}
	if s.Hostname != "" && !isDNSLabel(s.Hostname) {
		e.invalid(p+".hostname", "must be a DNS-1123 label")
	}
	if s.Subdomain != "" && !isDNSLabel(s.Subdomain) {
		e.invalid(p+".subdomain", "must be a DNS-1123 label")
	}
	if h := s.HostnameOverride; h != nil {
		switch {
		case len(*h) > 64 || !isDNSSubdomain(*h):
			e.invalid(p+".hostnameOverride", "must be a DNS-1123 subdomain of at most 64 characters")
		case s.HostNetwork:
			e.invalid(p+".hostnameOverride", "cannot be set with hostNetwork (the pod has the node's hostname)")
		}
	}
	if sc := s.SecurityContext; sc != nil {
		validateProfiles(e, p+".securityContext", sc.SeccompProfile, sc.AppArmorProfile)
	}
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace && s.HostPID {
		e.invalid(p+".shareProcessNamespace", "cannot be true together with hostPID")
	}
}

// validateHostUsers checks a pod with hostUsers false: a runtime that runs
// it in a user namespace, and none of the node's other namespaces (the API
// server's rule: a pod in a user namespace of its own shares none of the
// host's).
func validateHostUsers(e *errs, s *corev1.PodSpec, noUserNamespaces bool) {
	const p = "pod.spec"
	if s.HostUsers == nil || *s.HostUsers {
		return
	}
	if noUserNamespaces {
		e.unsupported(p+".hostUsers", "this node's container runtime does not support user namespaces (its Status reports no user_namespaces feature), and one that ignores them would run the pod as the host's root")
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"hostNetwork", s.HostNetwork}, {"hostPID", s.HostPID}, {"hostIPC", s.HostIPC}} {
		if f.set {
			e.invalid(p+"."+f.name, "forbidden when hostUsers is false")
		}
	}
}
