package schemas

import corev1 "k8s.io/api/core/v1"

// validateContainerSecurityContext checks the security context of the
// container at p but for privileged, which validatePrivileged checks;
// hostUsers is the pod's.
func validateContainerSecurityContext(e *errs, p string, sc *corev1.SecurityContext, hostUsers *bool) {
	if sc == nil {
		return
	}
	validateProfiles(e, p+".securityContext", sc.SeccompProfile, sc.AppArmorProfile)
	if sc.WindowsOptions != nil {
		e.unsupported(p+".securityContext.windowsOptions", "this node runs linux pods only")
	}
	if pm := sc.ProcMount; pm != nil {
		switch {
		case *pm != corev1.DefaultProcMount && *pm != corev1.UnmaskedProcMount:
			e.invalid(p+".securityContext.procMount", `must be "Default" or "Unmasked"`)
		case *pm == corev1.UnmaskedProcMount && (hostUsers == nil || *hostUsers):
			e.invalid(p+".securityContext.procMount", "`hostUsers` must be false to use `Unmasked`")
		}
	}
}

func isPrivileged(sc *corev1.SecurityContext) bool {
	return sc != nil && sc.Privileged != nil && *sc.Privileged
}

// validatePrivileged checks the container at p, sc its security context,
// when it is privileged: never without privilege escalation. Whether the
// node lets a pod be privileged at all is admission's (its Pod Security
// level).
func validatePrivileged(e *errs, p string, sc *corev1.SecurityContext) {
	if !isPrivileged(sc) {
		return
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		e.invalid(p+".securityContext.allowPrivilegeEscalation", "cannot be false for a privileged container")
	}
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
			if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" || CheckRelativePath(*sp.LocalhostProfile) != nil {
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
