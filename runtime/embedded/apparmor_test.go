package embedded

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestAppArmorLocalhostProfilesAreRefused(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	for _, tc := range []struct {
		name    string
		sc      *runtimeapi.LinuxContainerSecurityContext
		refused bool
	}{
		{"localhost", &runtimeapi.LinuxContainerSecurityContext{Apparmor: &runtimeapi.SecurityProfile{
			ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}}, true},
		{"localhost by the old field", &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "localhost/k8s-deny-write"}, true},
		{"runtime default", &runtimeapi.LinuxContainerSecurityContext{Apparmor: &runtimeapi.SecurityProfile{
			ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}, false},
		{"unconfined by the old field", &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "unconfined"}, false},
		{"privileged", &runtimeapi.LinuxContainerSecurityContext{Privileged: true, Apparmor: &runtimeapi.SecurityProfile{
			ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := containerConfig(strings.ReplaceAll(tc.name, " ", "-"), nil, "true")
			cfg.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: tc.sc}
			_, err := h.tryCreate(sb, sbCfg, cfg)
			if !tc.refused {
				if err != nil {
					t.Fatalf("CreateContainer: %v", err)
				}
				return
			}
			wantCode(t, err, codes.InvalidArgument)
			if !strings.Contains(err.Error(), `AppArmor profile "k8s-deny-write": AppArmor is not supported by jetlet-proc`) {
				t.Fatalf("error %v does not say why", err)
			}
		})
	}
}
