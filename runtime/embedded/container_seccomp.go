package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/seccomp"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// seccompProfile is the CRI's seccomp profile as containerd resolves it:
// the profile when set, else the deprecated seccomp_profile_path; nil (no
// filter) when neither is.
func seccompProfile(p *runtimeapi.SecurityProfile, deprecatedPath string) (*runtimeapi.SecurityProfile, error) {
	if p != nil || deprecatedPath == "" {
		return p, nil
	}
	switch deprecatedPath {
	case "runtime/default", "docker/default":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case "unconfined":
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	ref, ok := strings.CutPrefix(deprecatedPath, "localhost/")
	if !ok {
		return nil, fmt.Errorf("invalid seccomp profile %q", deprecatedPath)
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}, nil
}

// compileSeccompProfile compiles p for a process whose bounding capabilities
// are bounding (which the RuntimeDefault profile depends on): nil for no
// profile and Unconfined. A Localhost profile is an OCI seccomp JSON file,
// read now.
func compileSeccompProfile(p *runtimeapi.SecurityProfile, bounding []string) (*shim.Seccomp, error) {
	if p == nil {
		return nil, nil
	}
	if p.GetProfileType() != runtimeapi.SecurityProfile_Localhost && p.GetLocalhostRef() != "" {
		return nil, errors.New("seccomp: localhost_ref must only be set with the Localhost profile type")
	}
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_Unconfined:
		return nil, nil
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return seccomp.Compile(seccomp.DefaultProfile(bounding))
	case runtimeapi.SecurityProfile_Localhost:
		path := strings.TrimPrefix(p.GetLocalhostRef(), "localhost/")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("cannot load seccomp profile %q: %w", path, err)
		}
		profile := &specs.LinuxSeccomp{}
		if err := json.Unmarshal(data, profile); err != nil {
			return nil, fmt.Errorf("decoding seccomp profile %q: %w", path, err)
		}
		filter, err := seccomp.Compile(profile)
		if err != nil {
			return nil, fmt.Errorf("seccomp profile %q: %w", path, err)
		}
		return filter, nil
	}
	return nil, fmt.Errorf("seccomp: unknown profile type %v", p.GetProfileType())
}

// containerSeccomp is the filter of a container: none when privileged (as
// containerd), else its profile compiled for its bounding capabilities (nil
// when the runtime gives it none: jetlet's own user's, which hold nothing a
// default profile rule depends on).
func containerSeccomp(cfg *runtimeapi.ContainerConfig, caps *shim.Capabilities) (*shim.Seccomp, error) {
	sc := cfg.GetLinux().GetSecurityContext()
	if sc.GetPrivileged() {
		return nil, nil
	}
	p, err := seccompProfile(sc.GetSeccomp(), sc.GetSeccompProfilePath()) //nolint:staticcheck // the deprecated path is still honoured, as containerd does
	if err != nil {
		return nil, err
	}
	var bounding []string
	if caps != nil {
		bounding = caps.Bounding
	}
	return compileSeccompProfile(p, bounding)
}

// checkSandboxSeccomp loads and compiles the sandbox's profile, so that a
// bad one fails RunPodSandbox as it fails containerd's pause container. It
// is not installed: there is no pause container, and a filter on the pod
// shim would pass to every container it starts.
func checkSandboxSeccomp(sb *runtimeapi.PodSandboxConfig) error {
	sc := sb.GetLinux().GetSecurityContext()
	if sc.GetPrivileged() {
		return nil
	}
	p, err := seccompProfile(sc.GetSeccomp(), sc.GetSeccompProfilePath()) //nolint:staticcheck // as containerSeccomp
	if err != nil {
		return err
	}
	_, err = compileSeccompProfile(p, shim.DefaultCapabilities())
	return err
}
