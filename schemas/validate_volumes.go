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
// hostPath and emptyDir are what this node supports.
func validateVolumeSource(e *errs, p string, v *corev1.VolumeSource, noMemory bool) {
	if v.HostPath != nil && v.EmptyDir != nil {
		e.invalid(p, "may not specify more than one volume source")
	}
	if other := otherVolumeSource(v); other != "" {
		e.unsupported(p+"."+other, "this node supports hostPath and emptyDir volumes only")
	}
	if v.HostPath != nil {
		validateHostPath(e, p, v.HostPath)
	}
	if v.EmptyDir != nil {
		validateEmptyDir(e, p, v.EmptyDir, noMemory)
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
