package embedded

import (
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// checkAppArmor refuses an AppArmor profile this runtime cannot apply, as
// containerd refuses one on a host without AppArmor ("apparmor is not
// supported"): jetlet-proc confines no process with AppArmor, so a named
// (Localhost) profile is refused, never ignored. RuntimeDefault and
// Unconfined ask for no profile in particular and are let be, as containerd
// lets them be there; a privileged container gets no profile either way.
func checkAppArmor(sc *runtimeapi.LinuxContainerSecurityContext) error {
	if sc.GetPrivileged() {
		return nil
	}
	if p := sc.GetApparmor(); p != nil {
		if p.GetProfileType() == runtimeapi.SecurityProfile_Localhost {
			return fmt.Errorf("AppArmor profile %q: AppArmor is not supported by jetlet-proc", p.GetLocalhostRef())
		}
		return nil
	}
	name := sc.GetApparmorProfile() //nolint:staticcheck // the deprecated field is still read, as containerd reads it
	if name == "" || name == "runtime/default" || name == "unconfined" {
		return nil
	}
	return fmt.Errorf("AppArmor profile %q: AppArmor is not supported by jetlet-proc", strings.TrimPrefix(name, "localhost/"))
}
