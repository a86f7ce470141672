package schemas

import (
	"net/netip"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Patterns of the names the API server checks. The JSON Schemas carry the
// same patterns (see schemagen_test.go).
const (
	dnsLabelPattern     = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	dnsSubdomainPattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// Printable ASCII but '=': what a process environment can carry.
	envNamePattern  = `^[ -<>-~]+$`
	portNamePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// Resource names this node can account for.
	resourceNamePattern = `^(cpu|memory|ephemeral-storage|hugepages-.+)$`
	fieldPathPattern    = `^(metadata\.(name|namespace|uid|labels|annotations)|metadata\.(labels|annotations)\['[^']+'\]|spec\.(nodeName|serviceAccountName)|status\.(hostIP|hostIPs|podIP|podIPs))$`
	resourceRefPattern  = `^(limits|requests)\.(cpu|memory|ephemeral-storage|hugepages-.+)$`
	// A label or annotation key: an optional DNS subdomain prefix and '/',
	// then a name of at most 63 alphanumerics, '-', '_' and '.'.
	qualifiedNamePattern = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	labelValuePattern    = `^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	// The signals a container may be stopped with: Kubernetes' list for
	// Linux, which is the CRI's.
	stopSignalPattern = `^SIG(ABRT|ALRM|BUS|CHLD|CLD|CONT|FPE|HUP|ILL|INT|IO|IOT|KILL|PIPE|POLL|PROF|PWR|QUIT|SEGV|STKFLT|STOP|SYS|TERM|TRAP|TSTP|TTIN|TTOU|URG|USR1|USR2|VTALRM|WINCH|XCPU|XFSZ|RTMIN(\+([1-9]|1[0-5]))?|RTMAX(-([1-9]|1[0-4]))?)$`
)

var (
	resourceRefRE = regexp.MustCompile(resourceRefPattern)
	stopSignalRE  = regexp.MustCompile(stopSignalPattern)
)

// isQualifiedName is the rule for label and annotation keys.
func isQualifiedName(s string) bool {
	prefix, _, found := strings.Cut(s, "/")
	return matchQualifiedName(s) && (!found || len(prefix) <= 253)
}

// maxAnnotationBytes bounds the total size of a pod's annotations.
const maxAnnotationBytes = 256 << 10

func isDNSLabel(s string) bool     { return len(s) <= 63 && matchDNSLabel(s) }
func isDNSSubdomain(s string) bool { return len(s) <= 253 && matchDNSSubdomain(s) }

// isPortName is the IANA service name rule: at most 15 characters, lowercase
// letters, digits and single hyphens, at least one letter.
func isPortName(s string) bool {
	return len(s) <= 15 && matchDNSLabel(s) && strings.ContainsFunc(s, func(r rune) bool { return 'a' <= r && r <= 'z' }) && !strings.Contains(s, "--")
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func validateMetadata(e *errs, m *metav1.ObjectMeta, subjectUID string) {
	const p = "pod.metadata"
	switch {
	case m.Name == "":
		e.invalid(p+".name", "required")
	case !isDNSSubdomain(m.Name):
		e.invalid(p+".name", "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)")
	}
	switch {
	case m.Namespace == "":
		e.invalid(p+".namespace", "required")
	case !isDNSLabel(m.Namespace):
		e.invalid(p+".namespace", "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")
	}
	switch {
	case m.UID == "":
		e.invalid(p+".uid", "required")
	case !ValidUID(string(m.UID)):
		e.invalid(p+".uid", "not a valid pod UID (1 to 128 of A-Z a-z 0-9 _ -)")
	case string(m.UID) != subjectUID:
		e.invalid(p+".uid", "is "+strconv.Quote(string(m.UID))+" but the subject's uid is "+strconv.Quote(subjectUID))
	}
	for _, k := range sortedNames(m.Labels) {
		switch {
		case !isQualifiedName(k):
			e.invalid(p+".labels["+k+"]", "key must be a qualified name ([prefix/]name, name at most 63 alphanumerics, '-', '_', '.')")
		case !matchLabelValue(m.Labels[k]):
			e.invalid(p+".labels["+k+"]", "value must be at most 63 alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric")
		}
	}
	size := 0
	for _, k := range sortedNames(m.Annotations) {
		size += len(k) + len(m.Annotations[k])
		if !isQualifiedName(k) {
			e.invalid(p+".annotations["+k+"]", "key must be a qualified name ([prefix/]name, name at most 63 alphanumerics, '-', '_', '.')")
		}
	}
	if size > maxAnnotationBytes {
		e.invalid(p+".annotations", "must total at most 256 KiB")
	}
}

// sortedNames returns the keys of m in order, so that problems are reported in
// a stable order.
func sortedNames[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func validatePodSpec(e *errs, s *corev1.PodSpec, want IntentTarget) {
	const p = "pod.spec"

	// Fields this node cannot honour.
	if len(s.EphemeralContainers) > 0 {
		e.unsupported(p+".ephemeralContainers", "ephemeral containers are added through the API server's ephemeralcontainers subresource, which this node does not have")
	}
	if len(s.ResourceClaims) > 0 {
		e.unsupported(p+".resourceClaims", "dynamic resource allocation needs the API server")
	}
	if len(s.ImagePullSecrets) > 0 {
		e.unsupported(p+".imagePullSecrets", "this node cannot read Secrets; give the node its registry credentials with jetlet run --image-credentials (Docker's config.json)")
	}
	if s.OS != nil && s.OS.Name != corev1.Linux {
		e.unsupported(p+".os.name", "this node runs linux pods only")
	}
	if s.DNSConfig != nil {
		e.unsupported(p+".dnsConfig", "this node gives pods the runtime's DNS configuration (the host's resolv.conf), as dnsPolicy Default")
	}
	if len(s.HostAliases) > 0 {
		e.unsupported(p+".hostAliases", "this node does not manage the pod's /etc/hosts")
	}
	if s.Subdomain != "" {
		e.unsupported(p+".subdomain", "this node does not manage the pod's /etc/hosts, where the subdomain's fully qualified name goes")
	}
	if s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN {
		e.unsupported(p+".setHostnameAsFQDN", "this node has no cluster domain to qualify the hostname with")
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
	if s.HostUsers != nil && !*s.HostUsers {
		e.unsupported(p+".hostUsers", "this node does not run pods in user namespaces")
	}
	if s.Resources != nil {
		e.unsupported(p+".resources", "pod-level resources need a pod cgroup, which this node does not manage")
	}
	if sc := s.SecurityContext; sc != nil {
		if sc.WindowsOptions != nil {
			e.unsupported(p+".securityContext.windowsOptions", "this node runs linux pods only")
		}
		if sc.SELinuxChangePolicy != nil {
			e.unsupported(p+".securityContext.seLinuxChangePolicy", "this node leaves SELinux relabelling of volumes to the runtime")
		}
	}

	switch s.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		e.invalid(p+".restartPolicy", `must be "Always", "OnFailure" or "Never"`)
	}
	switch s.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault:
	case corev1.DNSNone:
		e.unsupported(p+".dnsPolicy", `"None" takes the pod's DNS from dnsConfig, which this node does not support`)
	default:
		e.invalid(p+".dnsPolicy", `must be "ClusterFirst", "ClusterFirstWithHostNet", "Default" or "None"`)
	}
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

	volumes := validateVolumes(e, s.Volumes, want.NoMemoryEmptyDir)

	if len(s.Containers) == 0 {
		e.invalid(p+".containers", "at least one container is required")
	}
	names := map[string]bool{}
	for i := range s.InitContainers {
		validateContainer(e, idx(p+".initContainers", i), &s.InitContainers[i], true, names, volumes, s, want.AllowPrivileged)
	}
	for i := range s.Containers {
		validateContainer(e, idx(p+".containers", i), &s.Containers[i], false, names, volumes, s, want.AllowPrivileged)
	}
}

// validateVolumes checks the pod's volumes and returns their names.
func validateVolumes(e *errs, vols []corev1.Volume, noMemory bool) map[string]bool {
	names := map[string]bool{}
	for i := range vols {
		v := &vols[i]
		p := idx("pod.spec.volumes", i)
		switch {
		case v.Name == "":
			e.invalid(p+".name", "required")
		case !isDNSLabel(v.Name):
			e.invalid(p+".name", "must be a DNS-1123 label")
		case names[v.Name]:
			e.invalid(p+".name", "duplicate volume name "+strconv.Quote(v.Name))
		}
		names[v.Name] = true

		if v.HostPath != nil && v.EmptyDir != nil {
			e.invalid(p, "may not specify more than one volume source")
		}
		if other := otherVolumeSource(&v.VolumeSource); other != "" {
			e.unsupported(p+"."+other, "this node supports hostPath and emptyDir volumes only")
		}
		if h := v.HostPath; h != nil {
			if h.Path == "" {
				e.invalid(p+".hostPath.path", "required")
			} else if !path.IsAbs(h.Path) {
				e.invalid(p+".hostPath.path", "must be an absolute path")
			}
			if h.Type != nil {
				switch *h.Type {
				case corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
					corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket,
					corev1.HostPathCharDev, corev1.HostPathBlockDev:
				default:
					e.invalid(p+".hostPath.type", "not a known hostPath type")
				}
			}
		}
		if d := v.EmptyDir; d != nil {
			switch d.Medium {
			case corev1.StorageMediumDefault:
			case corev1.StorageMediumMemory:
				if noMemory {
					e.unsupported(p+".emptyDir.medium", `"Memory" needs a tmpfs, which this node cannot mount (jetlet does not run as root)`)
				}
			default:
				e.unsupported(p+".emptyDir.medium", `this node supports the medium "" (disk) and "Memory" only`)
			}
			switch {
			case d.SizeLimit != nil && d.SizeLimit.Sign() < 0:
				e.invalid(p+".emptyDir.sizeLimit", "must be >= 0")
			case d.SizeLimit != nil && d.Medium != corev1.StorageMediumMemory:
				e.unsupported(p+".emptyDir.sizeLimit", `this node does not evict pods for local storage use; a sizeLimit is honoured for medium "Memory" (the tmpfs's size) only`)
			}
			if d.Mode != nil && (*d.Mode < 0 || *d.Mode > 0o1777) {
				e.invalid(p+".emptyDir.mode", "must be between 0 and 01777")
			}
		}
	}
	return names
}

// otherVolumeSource names the first volume source other than hostPath and
// emptyDir that is set, or "".
func otherVolumeSource(s *corev1.VolumeSource) string {
	rest := *s
	rest.HostPath, rest.EmptyDir = nil, nil
	if rest == (corev1.VolumeSource{}) {
		return ""
	}
	v := reflect.ValueOf(rest)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return "volumeSource"
}

func validateContainer(e *errs, p string, c *corev1.Container, init bool, names, volumes map[string]bool, s *corev1.PodSpec, allowPrivileged bool) {
	switch {
	case c.Name == "":
		e.invalid(p+".name", "required")
	case !isDNSLabel(c.Name):
		e.invalid(p+".name", "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")
	case names[c.Name]:
		e.invalid(p+".name", "duplicate container name "+strconv.Quote(c.Name)+" (names are unique across initContainers and containers)")
	}
	names[c.Name] = true

	switch {
	case c.Image == "":
		e.invalid(p+".image", "required")
	case strings.TrimSpace(c.Image) != c.Image:
		e.invalid(p+".image", "must not have leading or trailing white space")
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		e.invalid(p+".imagePullPolicy", `must be "Always", "IfNotPresent" or "Never"`)
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	default:
		e.invalid(p+".terminationMessagePolicy", `must be "File" or "FallbackToLogsOnError"`)
	}

	sidecar := false
	if c.RestartPolicy != nil {
		switch {
		case !init:
			e.unsupported(p+".restartPolicy", "per-container restart policies are supported on init containers (sidecars) only")
		case *c.RestartPolicy == corev1.ContainerRestartPolicyAlways:
			sidecar = true
		default:
			e.invalid(p+".restartPolicy", `must be "Always" (a sidecar) when set on an init container`)
		}
	}
	if len(c.RestartPolicyRules) > 0 {
		e.unsupported(p+".restartPolicyRules", "container restart rules are not supported by this node")
	}

	validatePorts(e, p, c.Ports, s.HostNetwork)
	validateEnv(e, p, c, s)
	validateResources(e, p+".resources", &c.Resources)
	for i, r := range c.ResizePolicy {
		rp := idx(p+".resizePolicy", i)
		if r.ResourceName != corev1.ResourceCPU && r.ResourceName != corev1.ResourceMemory {
			e.invalid(rp+".resourceName", `must be "cpu" or "memory"`)
		}
		if r.RestartPolicy != corev1.NotRequired && r.RestartPolicy != corev1.RestartContainer {
			e.invalid(rp+".restartPolicy", `must be "NotRequired" or "RestartContainer"`)
		}
	}

	if sc := c.SecurityContext; sc != nil {
		validateProfiles(e, p+".securityContext", sc.SeccompProfile, sc.AppArmorProfile)
		if sc.WindowsOptions != nil {
			e.unsupported(p+".securityContext.windowsOptions", "this node runs linux pods only")
		}
		if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			e.unsupported(p+".securityContext.procMount", `"Unmasked" needs a user namespace, which this node does not give pods`)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
		e.unsupported(p+".resources.limits[ephemeral-storage]", "this node does not evict pods for local storage use")
	}

	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	if privileged && !allowPrivileged {
		e.unsupported(p+".securityContext.privileged", "privileged containers are not allowed on this node (jetlet run --allow-privileged)")
	}
	if privileged && c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation {
		e.invalid(p+".securityContext.allowPrivilegeEscalation", "cannot be false for a privileged container")
	}

	validateMounts(e, p, c.VolumeMounts, volumes, privileged)
	if len(c.VolumeDevices) > 0 {
		e.unsupported(p+".volumeDevices", "block volumes need a persistentVolumeClaim, which this node does not support")
	}

	if init && !sidecar {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"livenessProbe", c.LivenessProbe != nil}, {"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil}, {"lifecycle", c.Lifecycle != nil},
		} {
			if f.set {
				e.invalid(p+"."+f.name, "may not be set on an init container unless its restartPolicy is \"Always\"")
			}
		}
	}
	if c.LivenessProbe != nil {
		validateProbe(e, p+".livenessProbe", c.LivenessProbe, true)
	}
	if c.ReadinessProbe != nil {
		validateProbe(e, p+".readinessProbe", c.ReadinessProbe, false)
		if c.ReadinessProbe.TerminationGracePeriodSeconds != nil {
			e.invalid(p+".readinessProbe.terminationGracePeriodSeconds", "must not be set on a readiness probe")
		}
	}
	if c.StartupProbe != nil {
		validateProbe(e, p+".startupProbe", c.StartupProbe, true)
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			validateLifecycleHandler(e, p+".lifecycle.postStart", l.PostStart)
		}
		if l.PreStop != nil {
			validateLifecycleHandler(e, p+".lifecycle.preStop", l.PreStop)
		}
		if l.StopSignal != nil && !stopSignalRE.MatchString(string(*l.StopSignal)) {
			e.invalid(p+".lifecycle.stopSignal", "must be a Linux signal name such as SIGTERM, SIGUSR1 or SIGRTMIN+1")
		}
	}
}

func validatePorts(e *errs, p string, ports []corev1.ContainerPort, hostNetwork bool) {
	seen := map[string]bool{}
	for i, port := range ports {
		pp := idx(p+".ports", i)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
			e.invalid(pp+".containerPort", "must be between 1 and 65535")
		}
		if port.HostPort < 0 || port.HostPort > 65535 {
			e.invalid(pp+".hostPort", "must be between 1 and 65535, or 0 for none")
		}
		if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			e.invalid(pp+".hostPort", "must equal containerPort when hostNetwork is true")
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			e.invalid(pp+".protocol", `must be "TCP", "UDP" or "SCTP"`)
		}
		if port.Name != "" {
			if !isPortName(port.Name) {
				e.invalid(pp+".name", "must be an IANA service name (at most 15 lowercase letters, digits and single '-', with a letter)")
			} else if seen[port.Name] {
				e.invalid(pp+".name", "duplicate port name "+strconv.Quote(port.Name))
			}
			seen[port.Name] = true
		}
		if port.HostIP != "" {
			if _, err := netip.ParseAddr(port.HostIP); err != nil {
				e.invalid(pp+".hostIP", "must be an IP address")
			}
		}
	}
}

func validateEnv(e *errs, p string, c *corev1.Container, s *corev1.PodSpec) {
	for i, f := range c.EnvFrom {
		fp := idx(p+".envFrom", i)
		switch {
		case f.ConfigMapRef != nil:
			e.unsupported(fp+".configMapRef", "this node cannot read ConfigMaps")
		case f.SecretRef != nil:
			e.unsupported(fp+".secretRef", "this node cannot read Secrets")
		default:
			e.invalid(fp, "must specify configMapRef or secretRef")
		}
	}
	for i, v := range c.Env {
		vp := idx(p+".env", i)
		if v.Name == "" {
			e.invalid(vp+".name", "required")
		} else if !matchEnvName(v.Name) {
			e.invalid(vp+".name", "must consist of printable ASCII characters other than '='")
		}
		f := v.ValueFrom
		if f == nil {
			continue
		}
		if v.Value != "" {
			e.invalid(vp+".valueFrom", "may not be set when value is not empty")
		}
		n := 0
		if f.FieldRef != nil {
			n++
			switch {
			case f.FieldRef.FieldPath == "":
				e.invalid(vp+".valueFrom.fieldRef.fieldPath", "required")
			case !matchFieldPath(f.FieldRef.FieldPath):
				e.invalid(vp+".valueFrom.fieldRef.fieldPath", "not a field this node can expose")
			}
			if f.FieldRef.APIVersion != "v1" {
				e.invalid(vp+".valueFrom.fieldRef.apiVersion", `must be "v1"`)
			}
		}
		if f.ResourceFieldRef != nil {
			n++
			validateResourceFieldRef(e, vp+".valueFrom.resourceFieldRef", f.ResourceFieldRef, s)
		}
		if f.ConfigMapKeyRef != nil {
			n++
			e.unsupported(vp+".valueFrom.configMapKeyRef", "this node cannot read ConfigMaps")
		}
		if f.SecretKeyRef != nil {
			n++
			e.unsupported(vp+".valueFrom.secretKeyRef", "this node cannot read Secrets")
		}
		if f.FileKeyRef != nil {
			n++
			e.unsupported(vp+".valueFrom.fileKeyRef", "environment from files in volumes is not supported by this node")
		}
		if n != 1 {
			e.invalid(vp+".valueFrom", "must specify exactly one source")
		}
	}
}

func validateResources(e *errs, p string, r *corev1.ResourceRequirements) {
	validateResourceList(e, p+".limits", r.Limits)
	validateResourceList(e, p+".requests", r.Requests)
	for _, name := range requestsOverLimits(r) {
		lim := r.Limits[name]
		e.invalid(p+".requests["+string(name)+"]", "must be less than or equal to the limit "+lim.String())
	}
	if len(r.Claims) > 0 {
		e.unsupported(p+".claims", "dynamic resource allocation needs the API server")
	}
}

// requestsOverLimits names the requests above their limit, in order (a
// map's order is random, and problems are reported in a stable one).
func requestsOverLimits(r *corev1.ResourceRequirements) []corev1.ResourceName {
	var over []corev1.ResourceName
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			over = append(over, name)
		}
	}
	slices.Sort(over)
	return over
}

func validateResourceList(e *errs, p string, l corev1.ResourceList) {
	for _, name := range sortedNames(l) {
		q := l[name]
		np := p + "[" + string(name) + "]"
		if !matchResourceName(string(name)) {
			e.unsupported(np, "this node accounts for cpu, memory, ephemeral-storage and hugepages-<size> only; extended resources need a device plugin")
		} else if size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix); ok {
			if q, err := resource.ParseQuantity(size); err != nil || q.Sign() <= 0 {
				e.invalid(np, "hugepages-<size> needs a page size such as 2Mi or 1Gi")
			}
		}
		if q.Sign() < 0 {
			e.invalid(np, "must be >= 0")
		}
	}
}

func validateMounts(e *errs, p string, mounts []corev1.VolumeMount, volumes map[string]bool, privileged bool) {
	paths := map[string]bool{}
	for i, m := range mounts {
		mp := idx(p+".volumeMounts", i)
		switch {
		case m.Name == "":
			e.invalid(mp+".name", "required")
		case !volumes[m.Name]:
			e.invalid(mp+".name", "no volume named "+strconv.Quote(m.Name)+" in pod.spec.volumes")
		}
		switch {
		case m.MountPath == "":
			e.invalid(mp+".mountPath", "required")
		case !path.IsAbs(m.MountPath):
			e.invalid(mp+".mountPath", "must be an absolute path")
		case paths[path.Clean(m.MountPath)]:
			e.invalid(mp+".mountPath", "duplicate mount path "+strconv.Quote(m.MountPath))
		}
		paths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" && !isRelativeInside(m.SubPath) {
			e.invalid(mp+".subPath", "must be a relative path without '..'")
		}
		if m.SubPath != "" && m.SubPathExpr != "" {
			e.invalid(mp+".subPathExpr", "subPath and subPathExpr are mutually exclusive")
		}
		if m.SubPathExpr != "" && !isRelativeInside(m.SubPathExpr) {
			e.invalid(mp+".subPathExpr", "must be a relative path without '..'")
		}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case corev1.MountPropagationNone, corev1.MountPropagationHostToContainer:
			case corev1.MountPropagationBidirectional:
				if !privileged {
					e.invalid(mp+".mountPropagation", `"Bidirectional" needs a privileged container`)
				}
			default:
				e.invalid(mp+".mountPropagation", `must be "None", "HostToContainer" or "Bidirectional"`)
			}
		}
		if m.RecursiveReadOnly != nil {
			switch *m.RecursiveReadOnly {
			case corev1.RecursiveReadOnlyDisabled:
			case corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled:
				if !m.ReadOnly {
					e.invalid(mp+".recursiveReadOnly", "needs readOnly true")
				}
				if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
					e.invalid(mp+".recursiveReadOnly", `needs mountPropagation "None"`)
				}
			default:
				e.invalid(mp+".recursiveReadOnly", `must be "Disabled", "IfPossible" or "Enabled"`)
			}
		}
		if len(m.BindMountOptions) > 0 {
			e.unsupported(mp+".bindMountOptions", "bind mount options are not supported by this node")
		}
	}
}

func isRelativeInside(p string) bool {
	if path.IsAbs(p) {
		return false
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}

func validateProbe(e *errs, p string, pr *corev1.Probe, mustSucceedOnce bool) {
	h := &pr.ProbeHandler
	n := 0
	if h.Exec != nil {
		n++
		validateExec(e, p+".exec", h.Exec)
	}
	if h.HTTPGet != nil {
		n++
		validateHTTPGet(e, p+".httpGet", h.HTTPGet)
	}
	if h.TCPSocket != nil {
		n++
		validatePortRef(e, p+".tcpSocket.port", h.TCPSocket.Port)
	}
	if h.GRPC != nil {
		n++
		if h.GRPC.Port < 1 || h.GRPC.Port > 65535 {
			e.invalid(p+".grpc.port", "must be between 1 and 65535")
		}
		if h.GRPC.Mode != nil && *h.GRPC.Mode != corev1.GRPCProbeModePlaintext {
			e.unsupported(p+".grpc.mode", `this node's gRPC probes connect in plain text only ("Plaintext")`)
		}
	}
	if n != 1 {
		e.invalid(p, "must specify exactly one handler of exec, httpGet, tcpSocket and grpc")
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds},
		{"periodSeconds", pr.PeriodSeconds}, {"successThreshold", pr.SuccessThreshold},
		{"failureThreshold", pr.FailureThreshold},
	} {
		if f.v < 0 {
			e.invalid(p+"."+f.name, "must be >= 0")
		}
	}
	if mustSucceedOnce && pr.SuccessThreshold > 1 {
		e.invalid(p+".successThreshold", "must be 1 for liveness and startup probes")
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g < 1 {
		e.invalid(p+".terminationGracePeriodSeconds", "must be a positive integer")
	}
}

func validateLifecycleHandler(e *errs, p string, h *corev1.LifecycleHandler) {
	n := 0
	if h.Exec != nil {
		n++
		validateExec(e, p+".exec", h.Exec)
	}
	if h.HTTPGet != nil {
		n++
		validateHTTPGet(e, p+".httpGet", h.HTTPGet)
	}
	if h.Sleep != nil {
		n++
		if h.Sleep.Seconds < 0 {
			e.invalid(p+".sleep.seconds", "must be >= 0")
		}
	}
	if h.TCPSocket != nil {
		n++
		e.unsupported(p+".tcpSocket", "tcpSocket is not a working lifecycle hook; use exec, httpGet or sleep")
	}
	if n != 1 {
		e.invalid(p, "must specify exactly one handler of exec, httpGet and sleep")
	}
}

func validateExec(e *errs, p string, x *corev1.ExecAction) {
	if len(x.Command) == 0 {
		e.invalid(p+".command", "required")
	}
}

func validateHTTPGet(e *errs, p string, h *corev1.HTTPGetAction) {
	validatePortRef(e, p+".port", h.Port)
	if h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		e.invalid(p+".scheme", `must be "HTTP" or "HTTPS"`)
	}
	if h.Protocol != nil && *h.Protocol != corev1.HTTPProtocolHTTP1 {
		e.unsupported(p+".protocol", `this node's handlers speak HTTP/1.1 only ("HTTP1")`)
	}
}

// validatePortRef checks a probe's port: a number in range or a port name.
func validatePortRef(e *errs, p string, port intstr.IntOrString) {
	if port.Type == intstr.String {
		if !isPortName(port.StrVal) {
			e.invalid(p, "must be a port number between 1 and 65535 or an IANA service name")
		}
		return
	}
	if port.IntVal < 1 || port.IntVal > 65535 {
		e.invalid(p, "must be between 1 and 65535")
	}
}

// Divisors the API server allows for a resourceFieldRef.
var (
	cpuDivisors     = []string{"1m", "1"}
	storageDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

func validateResourceFieldRef(e *errs, p string, r *corev1.ResourceFieldSelector, s *corev1.PodSpec) {
	if !resourceRefRE.MatchString(r.Resource) {
		e.invalid(p+".resource", "must be limits.<resource> or requests.<resource> for cpu, memory, ephemeral-storage or hugepages-<size>")
		return
	}
	if r.ContainerName != "" && !hasContainer(s, r.ContainerName) {
		e.invalid(p+".containerName", "no container "+strconv.Quote(r.ContainerName)+" in the pod")
	}
	if r.Divisor.IsZero() {
		return
	}
	allowed := storageDivisors
	if strings.HasSuffix(r.Resource, ".cpu") {
		allowed = cpuDivisors
	}
	if !slices.ContainsFunc(allowed, func(d string) bool { return r.Divisor.Cmp(resource.MustParse(d)) == 0 }) {
		e.invalid(p+".divisor", "must be one of "+strings.Join(allowed, ", "))
	}
}

func hasContainer(s *corev1.PodSpec, name string) bool {
	for _, list := range [][]corev1.Container{s.InitContainers, s.Containers} {
		if slices.ContainsFunc(list, func(c corev1.Container) bool { return c.Name == name }) {
			return true
		}
	}
	return false
}

// validateProfiles checks seccomp and AppArmor profiles as the API server:
// a Localhost profile names its file, the other types name none.
func validateProfiles(e *errs, p string, seccomp *corev1.SeccompProfile, apparmor *corev1.AppArmorProfile) {
	if sp := seccomp; sp != nil {
		switch sp.Type {
		case corev1.SeccompProfileTypeRuntimeDefault, corev1.SeccompProfileTypeUnconfined:
			if sp.LocalhostProfile != nil {
				e.invalid(p+".seccompProfile.localhostProfile", `only for type "Localhost"`)
			}
		case corev1.SeccompProfileTypeLocalhost:
			if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" || !isRelativeInside(*sp.LocalhostProfile) {
				e.invalid(p+".seccompProfile.localhostProfile", `type "Localhost" needs a relative path without '..' (under <data-dir>/seccomp)`)
			}
		default:
			e.invalid(p+".seccompProfile.type", `must be "RuntimeDefault", "Unconfined" or "Localhost"`)
		}
	}
	if ap := apparmor; ap != nil {
		switch ap.Type {
		case corev1.AppArmorProfileTypeRuntimeDefault, corev1.AppArmorProfileTypeUnconfined:
			if ap.LocalhostProfile != nil {
				e.invalid(p+".appArmorProfile.localhostProfile", `only for type "Localhost"`)
			}
		case corev1.AppArmorProfileTypeLocalhost:
			if ap.LocalhostProfile == nil || *ap.LocalhostProfile == "" {
				e.invalid(p+".appArmorProfile.localhostProfile", `type "Localhost" needs the profile's name`)
			}
		default:
			e.invalid(p+".appArmorProfile.type", `must be "RuntimeDefault", "Unconfined" or "Localhost"`)
		}
	}
}
