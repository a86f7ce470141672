package schemas

import corev1 "k8s.io/api/core/v1"

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
