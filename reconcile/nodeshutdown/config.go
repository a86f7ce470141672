package nodeshutdown

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SystemCriticalPriority is the priority from which a pod is critical: the
// system-cluster-critical class's (system-node-critical's is 1000 above).
// The two-flag form stops the pods at or above it last.
const SystemCriticalPriority int32 = 2_000_000_000

// defaultPriority is the priority of a pod that has none (scheduling's
// DefaultPriorityWhenNoDefaultClassExists): the two-flag form's first group.
const defaultPriority int32 = 0

// PriorityGrace is one group of the by-priority form: the pods whose
// priority is at least Priority (and below the next group's) are given
// GracePeriodSeconds to stop (kubelet's ShutdownGracePeriodByPodPriority).
type PriorityGrace struct {
	Priority           int32
	GracePeriodSeconds int64
}

// Config is the node's graceful shutdown, kubelet's three settings: the
// two-flag form (GracePeriod, GracePeriodCriticalPods) or the by-priority
// form (ByPodPriority), never both. All zero: disabled, the host goes down
// without waiting for the pods.
type Config struct {
	// GracePeriod is the whole time the node asks the host to wait
	// (--shutdown-grace-period); the pods that are not critical get what
	// GracePeriodCriticalPods leaves of it.
	GracePeriod time.Duration
	// GracePeriodCriticalPods is the part of GracePeriod kept for the
	// critical pods, stopped last (--shutdown-grace-period-critical-pods).
	GracePeriodCriticalPods time.Duration
	// ByPodPriority are the groups of the by-priority form
	// (--shutdown-grace-period-by-pod-priority), in any order.
	ByPodPriority []PriorityGrace
}

// Validate applies kubelet's rules: the durations are zero or at least one
// second, the critical part no longer than the whole, and the two forms are
// not mixed.
func (c Config) Validate() error {
	var errs []error
	if c.GracePeriodCriticalPods > c.GracePeriod {
		errs = append(errs, fmt.Errorf("--shutdown-grace-period-critical-pods %s must be at most --shutdown-grace-period %s", c.GracePeriodCriticalPods, c.GracePeriod))
	}
	for _, f := range []struct {
		flag string
		d    time.Duration
	}{{"shutdown-grace-period", c.GracePeriod}, {"shutdown-grace-period-critical-pods", c.GracePeriodCriticalPods}} {
		if f.d < 0 || f.d > 0 && f.d < time.Second {
			errs = append(errs, fmt.Errorf("--%s %s: must be 0 (disabled) or at least 1s", f.flag, f.d))
		}
	}
	if len(c.ByPodPriority) > 0 && (c.GracePeriod != 0 || c.GracePeriodCriticalPods != 0) {
		errs = append(errs, errors.New("--shutdown-grace-period-by-pod-priority cannot be given with --shutdown-grace-period or --shutdown-grace-period-critical-pods"))
	}
	seen := map[int32]bool{}
	for _, g := range c.ByPodPriority {
		if g.GracePeriodSeconds < 0 {
			errs = append(errs, fmt.Errorf("--shutdown-grace-period-by-pod-priority %d=%ds: the grace period must not be negative", g.Priority, g.GracePeriodSeconds))
		}
		if seen[g.Priority] {
			errs = append(errs, fmt.Errorf("--shutdown-grace-period-by-pod-priority: priority %d is given twice", g.Priority))
		}
		seen[g.Priority] = true
	}
	return errors.Join(errs...)
}

// Enabled says whether the node shuts down gracefully at all.
func (c Config) Enabled() bool { return len(c.groups()) > 0 }

// groups is the configuration as kubelet's manager runs it, by priority from
// low to high: the by-priority form as given, or the two-flag form made into
// two groups (kubelet's migrateConfig); none when disabled.
func (c Config) groups() []PriorityGrace {
	groups := slices.Clone(c.ByPodPriority)
	if len(groups) == 0 {
		if c.GracePeriod == 0 {
			return nil
		}
		groups = []PriorityGrace{
			{Priority: defaultPriority, GracePeriodSeconds: int64((c.GracePeriod - c.GracePeriodCriticalPods) / time.Second)},
			{Priority: SystemCriticalPriority, GracePeriodSeconds: int64(c.GracePeriodCriticalPods / time.Second)},
		}
	}
	slices.SortFunc(groups, func(a, b PriorityGrace) int { return cmp.Compare(a.Priority, b.Priority) })
	return groups
}

// requested is how long the groups may take in all: what the node asks
// logind to wait (kubelet's periodRequested).
func requested(groups []PriorityGrace) time.Duration {
	var sum int64
	for _, g := range groups {
		sum += g.GracePeriodSeconds
	}
	return time.Duration(sum) * time.Second
}

// ParsePriorityGrace parses one --shutdown-grace-period-by-pod-priority
// value, PRIORITY=DURATION (2000000000=10s): a 32-bit priority and a whole
// number of seconds.
func ParsePriorityGrace(s string) (PriorityGrace, error) {
	p, d, ok := strings.Cut(s, "=")
	if !ok {
		return PriorityGrace{}, fmt.Errorf("%q: want PRIORITY=DURATION, as 0=30s", s)
	}
	priority, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
	if err != nil {
		return PriorityGrace{}, fmt.Errorf("%q: the priority is not a 32-bit integer", s)
	}
	grace, err := time.ParseDuration(strings.TrimSpace(d))
	if err != nil {
		return PriorityGrace{}, fmt.Errorf("%q: the grace period is not a duration (30s, 2m)", s)
	}
	if grace%time.Second != 0 {
		return PriorityGrace{}, fmt.Errorf("%q: the grace period must be whole seconds", s)
	}
	return PriorityGrace{Priority: int32(priority), GracePeriodSeconds: int64(grace / time.Second)}, nil
}
