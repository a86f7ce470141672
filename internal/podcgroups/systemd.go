package podcgroups

import (
	"context"
	"fmt"
	"math"

	cgroupsv3 "github.com/containerd/cgroups/v3"
	systemd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/jetlet/jetlet/internal/systemdbus"
)

// systemdCgroups makes the cgroups as transient slices of systemd, with the
// properties runc's systemd manager gives the slices kubelet asks it for.
type systemdCgroups struct {
	conn *systemd.Conn
	v2   bool // the unified hierarchy: v2's property names
}

func dialSystemd(ctx context.Context) (*systemdCgroups, error) {
	conn, err := systemdbus.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("systemd cgroup driver: %w", err)
	}
	return &systemdCgroups{conn: conn, v2: cgroupsv3.Mode() == cgroupsv3.Unified}, nil
}

func (s *systemdCgroups) close() { s.conn.Close() }

// infinity is systemd's "no limit".
const infinity = uint64(math.MaxUint64)

// resourceProperties are res as unit properties (runc's
// genV1ResourcesProperties and genV2ResourcesProperties).
func resourceProperties(res Resources, v2 bool) []systemd.Property {
	var props []systemd.Property
	if res.CPUShares != nil {
		if v2 {
			props = append(props, systemdbus.Prop("CPUWeight", sharesToWeight(*res.CPUShares)))
		} else {
			props = append(props, systemdbus.Prop("CPUShares", *res.CPUShares))
		}
	}
	if res.CPUQuota != nil {
		period := uint64(defaultCPUPeriod)
		if res.CPUPeriod != nil && *res.CPUPeriod > 0 {
			period = *res.CPUPeriod
		}
		if v2 {
			props = append(props, systemdbus.Prop("CPUQuotaPeriodUSec", period))
		}
		props = append(props, systemdbus.Prop("CPUQuotaPerSecUSec", quotaPerSec(*res.CPUQuota, period)))
	}
	if res.Memory != nil && *res.Memory > 0 {
		if v2 {
			props = append(props, systemdbus.Prop("MemoryMax", uint64(*res.Memory)))
		} else {
			props = append(props, systemdbus.Prop("MemoryLimit", uint64(*res.Memory)))
		}
	}
	if res.PidsLimit != nil {
		limit := infinity
		if *res.PidsLimit > 0 {
			limit = uint64(*res.PidsLimit)
		}
		props = append(props, systemdbus.Prop("TasksMax", limit))
	}
	return props
}

// sharesToWeight converts cpu.shares to cpu.weight as runc and
// containerd/cgroups do ([2, 262144] to [1, 10000]).
func sharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// quotaPerSec is a quota per period as systemd's CPUQuotaPerSecUSec, rounded
// up to the 10 ms systemd keeps (runc's addCpuQuota); infinity for none.
func quotaPerSec(quota int64, period uint64) uint64 {
	if quota <= 0 {
		return infinity
	}
	perSec := uint64(quota) * 1000000 / period
	if perSec%10000 != 0 {
		perSec = (perSec/10000 + 1) * 10000
	}
	return perSec
}

func (s *systemdCgroups) ensure(ctx context.Context, n Name, res Resources) error {
	unit := n.Unit()
	resProps := resourceProperties(res, s.v2)
	props := []systemd.Property{
		systemd.PropDescription("jetlet pod cgroup " + unit),
		systemd.PropWants(n.Parent().Unit()),
		systemdbus.Prop("DefaultDependencies", false),
		systemdbus.Prop("MemoryAccounting", true),
		systemdbus.Prop("CPUAccounting", true),
		systemdbus.Prop("TasksAccounting", true),
	}
	if s.v2 {
		props = append(props, systemdbus.Prop("IOAccounting", true))
	} else {
		props = append(props, systemdbus.Prop("BlockIOAccounting", true))
	}
	done := make(chan string, 1)
	_, err := s.conn.StartTransientUnitContext(ctx, unit, "replace", append(props, resProps...), done)
	if systemdbus.IsError(err, systemdbus.ErrUnitExists) {
		if len(resProps) == 0 {
			return nil
		}
		if err := s.conn.SetUnitPropertiesContext(ctx, unit, true, resProps...); err != nil {
			return fmt.Errorf("systemd: set properties of %s: %w", unit, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("systemd: start %s: %w", unit, err)
	}
	return systemdbus.WaitJob(ctx, "start", unit, done)
}

// remove stops the pod's slice: systemd removes its cgroup (and stops what
// is left in it, as kubelet's Destroy kills the pod cgroup's processes).
func (s *systemdCgroups) remove(ctx context.Context, n Name) error {
	unit := n.Unit()
	done := make(chan string, 1)
	_, err := s.conn.StopUnitContext(ctx, unit, "replace", done)
	if systemdbus.IsError(err, systemdbus.ErrNoSuchUnit) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("systemd: stop %s: %w", unit, err)
	}
	if err := systemdbus.WaitJob(ctx, "stop", unit, done); err != nil {
		return err
	}
	_ = s.conn.ResetFailedUnitContext(ctx, unit) // a slice that failed stays listed until reset
	return nil
}

// podPatterns match the pod slices under each level.
var podPatterns = []string{"kubepods-pod*.slice", "kubepods-burstable-pod*.slice", "kubepods-besteffort-pod*.slice"}

func (s *systemdCgroups) pods(ctx context.Context) ([]Name, error) {
	units, err := s.conn.ListUnitsByPatternsContext(ctx, nil, podPatterns)
	if err != nil {
		return nil, fmt.Errorf("systemd: list units: %w", err)
	}
	var out []Name
	for _, u := range units {
		if n, ok := unitName(u.Name); ok {
			if _, pod := n.podUID(); pod {
				out = append(out, n)
			}
		}
	}
	return out, nil
}
