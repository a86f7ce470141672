package embedded

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// networkNotReady is the reason of NetworkReady false, as containerd's.
const networkNotReady = "NetworkPluginNotReady"

// Status reports RuntimeReady and NetworkReady: false, with the reason, when
// pods have no usable network of their own (only lo, or the host's).
func (r *Runtime) Status(ctx context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	netReady := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: r.netDown == ""}
	if r.netDown != "" {
		netReady.Reason, netReady.Message = networkNotReady, r.netDown
	}
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			netReady,
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{
			Name: "",
			// Recursive read-only mounts are not implemented.
			Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: r.usernsOff == nil},
		}},
		// Users, groups and their policy are honoured in a container's own
		// mount namespace (as root), and ContainerStatus reports them.
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: r.isolated()},
	}
	if req.GetVerbose() {
		cgroups, why := r.cgroupsEnabled()
		usernsOffReason := ""
		if r.usernsOff != nil {
			usernsOffReason = r.usernsOff.Error()
		}
		info, _ := json.Marshal(map[string]any{
			"runtime":                 RuntimeName,
			"version":                 RuntimeVersion,
			"dir":                     r.cfg.Dir,
			"stateDir":                r.cfg.Dir, // containerd's name, which critest reads
			"shim":                    r.cfg.ShimPath,
			"isolation":               r.iso.level,
			"isolationMissing":        r.iso.missing,
			"linkMountsOnHost":        r.cfg.LinkMountsOnHost,
			"cgroups":                 cgroups,
			"cgroupsOffReason":        why,
			"podPidsLimit":            r.cfg.PodPidsLimit,
			"userNamespaces":          r.usernsOff == nil,
			"userNamespacesOffReason": usernsOffReason,
			"podNetworkDownReason":    r.netDown,
		})
		resp.Info = map[string]string{"config": string(info)}
	}
	return resp, nil
}

// RuntimeConfig reports the cgroupfs driver: the runtime writes the cgroup
// files itself, and a sandbox's cgroup_parent is a path under the
// controllers' roots (one in the systemd driver's form is refused).
func (r *Runtime) RuntimeConfig(ctx context.Context, req *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{
		Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS},
	}, nil
}

// UpdateRuntimeConfig accepts the pod CIDR and ignores it: the pod network's
// subnet is the runtime's config (Config.PodCIDR or the CNI config).
func (r *Runtime) UpdateRuntimeConfig(ctx context.Context, req *runtimeapi.UpdateRuntimeConfigRequest) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}
