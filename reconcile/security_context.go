package reconcile

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// seccompProfileDir, under the data dir, holds the Localhost seccomp
// profiles (kubelet's <root-dir>/seccomp).
const seccompProfileDir = "seccomp"

// seccompProfile is the CRI profile of the container's seccompProfile, else
// the pod's; nil (the runtime's unconfined default) when neither sets one.
func (m *Kuberuntime) seccompProfile(pod, c *corev1.SeccompProfile) *runtimeapi.SecurityProfile {
	p := pod
	if c != nil {
		p = c
	}
	if p == nil {
		return nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.SeccompProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = filepath.Join(m.cfg.DataDir, seccompProfileDir, *p.LocalhostProfile)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// appArmorProfile is the CRI profile of the container's appArmorProfile,
// else the pod's; nil when neither sets one.
func appArmorProfile(pod, c *corev1.AppArmorProfile) *runtimeapi.SecurityProfile {
	p := pod
	if c != nil {
		p = c
	}
	if p == nil {
		return nil
	}
	switch p.Type {
	case corev1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.AppArmorProfileTypeLocalhost:
		ref := ""
		if p.LocalhostProfile != nil {
			ref = *p.LocalhostProfile
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// seLinuxOptions is the container's seLinuxOptions, else the pod's, whole
// (kubelet does not merge them field by field).
func seLinuxOptions(pod, c *corev1.SELinuxOptions) *runtimeapi.SELinuxOption {
	o := pod
	if c != nil {
		o = c
	}
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

func supplementalGroupsPolicy(psc *corev1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

// supplementalGroups are the pod's supplemental groups plus its fsGroup, as
// kubelet gives them to the sandbox and every container.
func supplementalGroups(psc *corev1.PodSecurityContext) []int64 {
	if psc == nil {
		return nil
	}
	groups := psc.SupplementalGroups
	if psc.FSGroup != nil {
		groups = append(groups[:len(groups):len(groups)], *psc.FSGroup)
	}
	return groups
}

// verifyRunAsNonRoot refuses a container that must not run as root but
// would, as kubelet's verifyRunAsNonRoot: by its effective runAsUser, else by
// the image's user (asked of the runtime only then).
func (m *Kuberuntime) verifyRunAsNonRoot(ctx context.Context, pod *corev1.Pod, c *corev1.Container, imageRef string) error {
	var nonRoot *bool
	var user *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot, user = psc.RunAsNonRoot, psc.RunAsUser
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.RunAsUser != nil {
			user = sc.RunAsUser
		}
	}
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	if user != nil {
		if *user == 0 {
			return fmt.Errorf("container %q: runAsUser 0 breaks the runAsNonRoot policy", c.Name)
		}
		return nil
	}
	image := imageRef
	if image == "" {
		image = c.Image
	}
	resp, err := m.rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return fmt.Errorf("container %q: runAsNonRoot: image user of %q: %w", c.Name, c.Image, err)
	}
	img := resp.GetImage()
	switch {
	case img.GetUid() != nil && img.GetUid().GetValue() == 0:
		return fmt.Errorf("container %q has runAsNonRoot and image %q will run as root", c.Name, c.Image)
	case img.GetUid() == nil && img.GetUsername() != "":
		return fmt.Errorf("container %q has runAsNonRoot and image %q has the non-numeric user %q, which cannot be verified as non-root", c.Name, c.Image, img.GetUsername())
	}
	return nil
}

// kubelet's default masked and read-only paths (pkg/securitycontext), which
// it names in every container's config: a runtime takes the config's list.
var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// maskedPaths and readonlyPaths are kubelet's defaults, none for procMount
// Unmasked (which validation allows only with hostUsers false).
func maskedPaths(procMount *corev1.ProcMountType) []string {
	if procMount != nil && *procMount == corev1.UnmaskedProcMount {
		return nil
	}
	return defaultMaskedPaths
}

func readonlyPaths(procMount *corev1.ProcMountType) []string {
	if procMount != nil && *procMount == corev1.UnmaskedProcMount {
		return nil
	}
	return defaultReadonlyPaths
}
