package schemas

import (
	"path"
	"reflect"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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
		validateVolumeSource(e, p, &v.VolumeSource, noMemory)
	}
	return names
}

// validateVolumeSource checks a volume's source (at p, the volume's path):
// hostPath, emptyDir and the volumes of API data (configMap, secret,
// downwardAPI, projected) are what this node supports. noMemory: the node
// cannot mount a tmpfs, which Memory emptyDirs and Secrets need.
func validateVolumeSource(e *errs, p string, v *corev1.VolumeSource, noMemory bool) {
	n := 0
	for _, set := range []bool{v.HostPath != nil, v.EmptyDir != nil, v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		e.invalid(p, "may not specify more than one volume source")
	}
	if other := otherVolumeSource(v); other != "" {
		e.unsupported(p+"."+other, "this node supports hostPath, emptyDir, configMap, secret, downwardAPI and projected volumes only")
	}
	if v.HostPath != nil {
		validateHostPath(e, p, v.HostPath)
	}
	if v.EmptyDir != nil {
		validateEmptyDir(e, p, v.EmptyDir, noMemory)
	}
	if c := v.ConfigMap; c != nil {
		validateObjectName(e, p+".configMap.name", c.Name)
		validateItems(e, p+".configMap", c.Items)
		validateMode(e, p+".configMap.defaultMode", c.DefaultMode)
		rejectOwner(e, p+".configMap.defaultUser", c.DefaultUser)
	}
	if s := v.Secret; s != nil {
		validateObjectName(e, p+".secret.secretName", s.SecretName)
		validateItems(e, p+".secret", s.Items)
		validateMode(e, p+".secret.defaultMode", s.DefaultMode)
		rejectOwner(e, p+".secret.defaultUser", s.DefaultUser)
		if noMemory {
			e.unsupported(p+".secret", needsATmpfs("secret"))
		}
	}
	if d := v.DownwardAPI; d != nil {
		if noMemory {
			e.unsupported(p+".downwardAPI", needsATmpfs("downwardAPI"))
		}
		validateDownwardAPIItems(e, p+".downwardAPI", d.Items)
		validateMode(e, p+".downwardAPI.defaultMode", d.DefaultMode)
		rejectOwner(e, p+".downwardAPI.defaultUser", d.DefaultUser)
	}
	if pr := v.Projected; pr != nil {
		validateProjected(e, p+".projected", pr, noMemory)
	}
}

// needsATmpfs is why a volume kubelet keeps in memory is refused on a node
// that cannot mount a tmpfs.
func needsATmpfs(kind string) string {
	return kind + " volumes are kept in memory (a tmpfs), as kubelet keeps them, which this node cannot mount (jetlet does not run as root)"
}

func validateObjectName(e *errs, p, name string) {
	if name == "" {
		e.invalid(p, "required")
	} else if !isDNSSubdomain(name) {
		e.invalid(p, "must be a DNS-1123 subdomain")
	}
}

func validateMode(e *errs, p string, mode *int32) {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		e.invalid(p, "must be between 0 and 0777")
	}
}

// validatePayloadPath checks a file path inside a volume of API data, as
// the API server: relative, no '..' element, not starting with '..'.
func validatePayloadPath(e *errs, p, file string) {
	switch {
	case file == "":
		e.invalid(p, "required")
	case CheckRelativePath(file) != nil:
		e.invalid(p, CheckRelativePath(file).Error())
	case strings.HasPrefix(file, ".."):
		e.invalid(p, "must not start with '..'")
	}
}

func validateItems(e *errs, p string, items []corev1.KeyToPath) {
	for i, it := range items {
		ip := idx(p+".items", i)
		if it.Key == "" {
			e.invalid(ip+".key", "required")
		}
		validatePayloadPath(e, ip+".path", it.Path)
		validateMode(e, ip+".mode", it.Mode)
		rejectOwner(e, ip+".user", it.User)
	}
}

// rejectOwner refuses a file owner of a volume of API data: this node
// writes them owned by root (an fsGroup sets their group), and takes no
// field it would ignore.
func rejectOwner(e *errs, p string, user *int64) {
	if user != nil {
		e.unsupported(p, "this node does not set the owner of a volume's files (they are root's; fsGroup sets their group)")
	}
}

// validateDownwardAPIItems: metadata fields only (name, namespace, uid,
// labels, annotations and their subscripts), or a resourceFieldRef naming
// its container.
func validateDownwardAPIItems(e *errs, p string, items []corev1.DownwardAPIVolumeFile) {
	for i, it := range items {
		ip := idx(p+".items", i)
		validatePayloadPath(e, ip+".path", it.Path)
		validateMode(e, ip+".mode", it.Mode)
		rejectOwner(e, ip+".user", it.User)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			e.invalid(ip, "fieldRef and resourceFieldRef are mutually exclusive")
		case it.FieldRef != nil:
			f := it.FieldRef.FieldPath
			if !strings.HasPrefix(f, "metadata.") || !matchFieldPath(f) {
				e.invalid(ip+".fieldRef.fieldPath", "must be metadata.name, namespace, uid, labels, annotations, labels['<key>'] or annotations['<key>']")
			}
		case it.ResourceFieldRef != nil:
			if it.ResourceFieldRef.ContainerName == "" {
				e.invalid(ip+".resourceFieldRef.containerName", "required in a volume")
			}
		default:
			e.invalid(ip, "must specify fieldRef or resourceFieldRef")
		}
	}
}

func validateProjected(e *errs, p string, pr *corev1.ProjectedVolumeSource, noMemory bool) {
	if noMemory {
		e.unsupported(p, needsATmpfs("projected"))
	}
	validateMode(e, p+".defaultMode", pr.DefaultMode)
	rejectOwner(e, p+".defaultUser", pr.DefaultUser)
	for i, src := range pr.Sources {
		sp := idx(p+".sources", i)
		switch {
		case src.ServiceAccountToken != nil:
			e.unsupported(sp+".serviceAccountToken", "no API server issues service account tokens to this node")
		case src.ClusterTrustBundle != nil:
			e.unsupported(sp+".clusterTrustBundle", "no API server serves cluster trust bundles to this node")
		case src.PodCertificate != nil:
			e.unsupported(sp+".podCertificate", "no API server issues pod certificates to this node")
		case src.ConfigMap != nil:
			validateObjectName(e, sp+".configMap.name", src.ConfigMap.Name)
			validateItems(e, sp+".configMap", src.ConfigMap.Items)
		case src.Secret != nil:
			validateObjectName(e, sp+".secret.name", src.Secret.Name)
			validateItems(e, sp+".secret", src.Secret.Items)
		case src.DownwardAPI != nil:
			validateDownwardAPIItems(e, sp+".downwardAPI", src.DownwardAPI.Items)
		default:
			e.invalid(sp, "must specify one source")
		}
	}
}

// validateHostPath checks the hostPath of the volume at p.
func validateHostPath(e *errs, p string, h *corev1.HostPathVolumeSource) {
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

// validateEmptyDir checks the emptyDir of the volume at p; noMemory: the
// node cannot mount the tmpfs of medium Memory.
func validateEmptyDir(e *errs, p string, d *corev1.EmptyDirVolumeSource, noMemory bool) {
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

// otherVolumeSource names the first volume source this node does not
// support that is set, or "".
func otherVolumeSource(s *corev1.VolumeSource) string {
	rest := *s
	rest.HostPath, rest.EmptyDir, rest.ConfigMap, rest.Secret, rest.DownwardAPI, rest.Projected = nil, nil, nil, nil, nil, nil
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
		if err := CheckRelativePath(m.SubPath); m.SubPath != "" && err != nil {
			e.invalid(mp+".subPath", err.Error())
		}
		if m.SubPath != "" && m.SubPathExpr != "" {
			e.invalid(mp+".subPathExpr", "subPath and subPathExpr are mutually exclusive")
		}
		if err := CheckRelativePath(m.SubPathExpr); m.SubPathExpr != "" && err != nil {
			e.invalid(mp+".subPathExpr", err.Error())
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
