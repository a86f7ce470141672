package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/podcgroups"
	"github.com/jetlet/jetlet/reconcile/nodestatus"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crierr"
)

// startPodCgroups makes kubelet's pod cgroups for a CRI runtime, with the
// driver the runtime says it uses; nil on the embedded runtime (it places
// its pods in its own subtree) and with --cgroups-per-qos=false.
func (a *agent) startPodCgroups(ctx context.Context, client *runtime.Client, n *nodeInfo, log zerolog.Logger) (*podcgroups.Manager, error) {
	if a.cfg.runtimeEndpoint == "" || !a.cfg.cgroupsPerQOS {
		return nil, nil
	}
	resp, err := client.RuntimeConfig(ctx)
	driver, why, err := cgroupDriver(resp, err, a.cfg.cgroupDriver)
	if err != nil {
		return nil, err
	}
	mgr, err := podcgroups.New(podcgroups.Config{
		Driver:       driver,
		PodPidsLimit: a.cfg.podMaxPids,
		Allocatable:  nodestatus.Allocatable(n.capacity, a.cfg.nodeStatus.reserved...),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Start(ctx); err != nil {
		return nil, fmt.Errorf("pod cgroups (%s driver, %s): %w; --cgroups-per-qos=false leaves them to the runtime", driver, why, err)
	}
	log.Info().Str("cgroup_driver", string(driver)).Str("from", why).Msg("pods get kubelet's cgroups: kubepods, by QoS class, one per pod")
	return mgr, nil
}

// cgroupDriver is the runtime's cgroup driver from its RuntimeConfig answer
// (KEP-4033), which wins over the flag as with kubelet; the flag when the
// runtime does not implement the call (containerd before 2.0). It says
// where the driver came from.
func cgroupDriver(resp *runtimeapi.RuntimeConfigResponse, err error, flag string) (podcgroups.Driver, string, error) {
	if errors.Is(err, crierr.ErrUnimplemented) {
		d, err := podcgroups.ParseDriver(flag)
		return d, "--cgroup-driver (the runtime has no RuntimeConfig)", err
	}
	if err != nil {
		return "", "", fmt.Errorf("ask the runtime for its cgroup driver (CRI RuntimeConfig): %w", err)
	}
	if resp.GetLinux() == nil {
		// The enum's zero is SYSTEMD: an answer without it says nothing.
		d, err := podcgroups.ParseDriver(flag)
		return d, "--cgroup-driver (the runtime's RuntimeConfig has no Linux part)", err
	}
	if resp.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_SYSTEMD {
		return podcgroups.Systemd, "the runtime's RuntimeConfig", nil
	}
	return podcgroups.Cgroupfs, "the runtime's RuntimeConfig", nil
}
