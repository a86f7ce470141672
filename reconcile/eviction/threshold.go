package eviction

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultEvictionHard is --eviction-hard's default, kubelet's on Linux. A
// flag that is set replaces it whole, as kubelet's does.
const DefaultEvictionHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%,imagefs.inodesFree<5%"

// ThresholdValue is a threshold's (or a minimum reclaim's) amount: a
// Quantity, or else a Percentage of the signal's capacity.
type ThresholdValue struct {
	Quantity *resource.Quantity
	// Percentage is a fraction (0.1 for 10%), a float32 as kubelet's, so
	// that the amounts it gives are kubelet's to the byte.
	Percentage float32
}

// amount is the value for a signal whose capacity is capacity.
func (v ThresholdValue) amount(capacity resource.Quantity) resource.Quantity {
	if v.Quantity != nil {
		return v.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(capacity.Value())*float64(v.Percentage)), resource.BinarySI)
}

func (v ThresholdValue) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	// Six digits undo float32's noise: 15%, not 15.000001%.
	return strconv.FormatFloat(float64(v.Percentage)*100, 'g', 6, 64) + "%"
}

// Threshold is met when its signal's available amount is less than Value.
// A Threshold is also its own identity (maps are keyed by it): the manager
// only copies those ParseThresholds made, so their pointers stay the same.
type Threshold struct {
	Signal Signal
	Value  ThresholdValue
	// GracePeriod is how long the threshold must be met before pods are
	// evicted for it: zero for a hard threshold.
	GracePeriod time.Duration
	// MinReclaim, when set, is how much beyond Value must be available again
	// before a met threshold counts as resolved.
	MinReclaim *ThresholdValue
}

// hard says whether pods are evicted as soon as the threshold is met, with
// next to no grace.
func (t Threshold) hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string {
	s := string(t.Signal) + "<" + t.Value.String()
	if !t.hard() {
		s += " for " + t.GracePeriod.String()
	}
	if t.MinReclaim != nil {
		s += " reclaiming " + t.MinReclaim.String()
	}
	return s
}

// ParseThresholds parses kubelet's eviction flags: --eviction-hard and
// --eviction-soft ("memory.available<100Mi,nodefs.available<10%"),
// --eviction-soft-grace-period ("memory.available=1m30s") and
// --eviction-minimum-reclaim ("memory.available=500Mi", "nodefs.available=5%"),
// with kubelet's rules: a soft threshold needs a grace period; a threshold of
// 0% or 100% is dropped (that is how a default is turned off); amounts are
// positive, percentages at most 100%; a minimum reclaim applies to the hard
// and the soft threshold of its signal. The thresholds come in the order the
// flags give them, hard first. A signal named twice in one flag is refused.
func ParseThresholds(hard, soft, softGracePeriod, minReclaim string) ([]Threshold, error) {
	hardThresholds, err := parseThresholdStatements(hard)
	if err != nil {
		return nil, err
	}
	softThresholds, err := parseThresholdStatements(soft)
	if err != nil {
		return nil, err
	}
	gracePeriods, err := parseGracePeriods(softGracePeriod)
	if err != nil {
		return nil, err
	}
	minReclaims, err := parseMinimumReclaims(minReclaim)
	if err != nil {
		return nil, err
	}
	for i := range softThresholds {
		period, ok := gracePeriods[softThresholds[i].Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", softThresholds[i].Signal)
		}
		softThresholds[i].GracePeriod = period
	}
	thresholds := append(hardThresholds, softThresholds...)
	for i := range thresholds {
		if r, ok := minReclaims[thresholds[i].Signal]; ok {
			thresholds[i].MinReclaim = &r
		}
	}
	return thresholds, nil
}

// flagPair is one "signal<value" or "signal=value" of a flag.
type flagPair struct {
	signal Signal
	value  string
}

// splitFlag splits a flag as kubelet's map flags do: pairs separated by
// commas, each split at its first sep, spaces trimmed; a signal must be one
// jetlet observes and may come once.
func splitFlag(flag, sep string) ([]flagPair, error) {
	var pairs []flagPair
	seen := map[Signal]bool{}
	for _, item := range strings.Split(flag, ",") {
		if item == "" {
			continue
		}
		key, value, ok := strings.Cut(item, sep)
		if !ok {
			return nil, fmt.Errorf("malformed pair %q, expect string%sstring", item, sep)
		}
		signal := Signal(strings.TrimSpace(key))
		if !validSignal(signal) {
			return nil, fmt.Errorf("unsupported eviction signal %v", signal)
		}
		if seen[signal] {
			return nil, fmt.Errorf("found duplicate eviction signal %v in %q", signal, flag)
		}
		seen[signal] = true
		pairs = append(pairs, flagPair{signal, strings.TrimSpace(value)})
	}
	return pairs, nil
}

func parseThresholdStatements(flag string) ([]Threshold, error) {
	pairs, err := splitFlag(flag, "<")
	if err != nil {
		return nil, err
	}
	var thresholds []Threshold
	for _, p := range pairs {
		if p.value == "0%" || p.value == "100%" {
			continue // turned off
		}
		value, err := parseValue(p, "eviction threshold")
		if err != nil {
			return nil, err
		}
		switch {
		case value.Quantity != nil && value.Quantity.Sign() <= 0:
			return nil, fmt.Errorf("eviction threshold %v must be positive: %s", p.signal, value.Quantity)
		case value.Quantity == nil && value.Percentage < 0:
			return nil, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", p.signal, p.value)
		case value.Quantity == nil && value.Percentage > 1:
			return nil, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", p.signal, p.value)
		}
		thresholds = append(thresholds, Threshold{Signal: p.signal, Value: value})
	}
	return thresholds, nil
}

// parseValue reads a pair's value: a percentage ("10%") or a quantity.
func parseValue(p flagPair, what string) (ThresholdValue, error) {
	if percent, ok := strings.CutSuffix(p.value, "%"); ok {
		value, err := strconv.ParseFloat(percent, 32)
		if err != nil {
			return ThresholdValue{}, fmt.Errorf("%s of %v: %q: %w", what, p.signal, p.value, err)
		}
		return ThresholdValue{Percentage: float32(value) / 100}, nil
	}
	quantity, err := resource.ParseQuantity(p.value)
	if err != nil {
		return ThresholdValue{}, fmt.Errorf("%s of %v: %q: %w", what, p.signal, p.value, err)
	}
	return ThresholdValue{Quantity: &quantity}, nil
}

func parseGracePeriods(flag string) (map[Signal]time.Duration, error) {
	pairs, err := splitFlag(flag, "=")
	if err != nil {
		return nil, err
	}
	periods := map[Signal]time.Duration{}
	for _, p := range pairs {
		period, err := time.ParseDuration(p.value)
		if err != nil {
			return nil, fmt.Errorf("eviction grace period of %v: %w", p.signal, err)
		}
		if period < 0 {
			return nil, fmt.Errorf("invalid eviction grace period specified: %v, must be a positive value", p.value)
		}
		periods[p.signal] = period
	}
	return periods, nil
}

func parseMinimumReclaims(flag string) (map[Signal]ThresholdValue, error) {
	pairs, err := splitFlag(flag, "=")
	if err != nil {
		return nil, err
	}
	reclaims := map[Signal]ThresholdValue{}
	for _, p := range pairs {
		value, err := parseValue(p, "eviction minimum reclaim")
		if err != nil {
			return nil, err
		}
		switch {
		case value.Quantity != nil && value.Quantity.Sign() < 0:
			return nil, fmt.Errorf("negative eviction minimum reclaim specified for %v", p.signal)
		case value.Quantity == nil && value.Percentage <= 0:
			return nil, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", p.signal, p.value)
		}
		reclaims[p.signal] = value
	}
	return reclaims, nil
}

// HardEvictionReservation is what the hard thresholds set aside from the
// node's capacity, which allocatable leaves out (kubelet's container manager,
// hardEvictionReservation): memory for memory.available, ephemeral-storage for
// nodefs.available, a percentage taken of that resource's capacity. Soft
// thresholds reserve nothing.
func HardEvictionReservation(thresholds []Threshold, capacity corev1.ResourceList) corev1.ResourceList {
	reserved := corev1.ResourceList{}
	for _, t := range thresholds {
		if !t.hard() {
			continue
		}
		var name corev1.ResourceName
		switch t.Signal {
		case SignalMemoryAvailable:
			name = corev1.ResourceMemory
		case SignalNodeFsAvailable:
			name = corev1.ResourceEphemeralStorage
		default:
			continue
		}
		reserved[name] = t.Value.amount(capacity[name])
	}
	return reserved
}

// containerFsThresholds are thresholds with kubelet's containerfs thresholds
// (UpdateContainerFsThresholds): copies of nodefs's where writable layers are
// on nodefs (one file system for everything, or images split off on their
// own, KEP-4191), of imagefs's where they are on imagefs with the images.
// containerfs thresholds the flags set are dropped, as kubelet overrides
// them. The copies keep their source's MinReclaim pointer, so that each
// round derives the same thresholds (the manager keys maps by them).
func containerFsThresholds(thresholds []Threshold, dedicatedImageFs, splitContainerFs bool) []Threshold {
	var from map[Signal]Signal
	switch {
	case dedicatedImageFs && !splitContainerFs:
		from = map[Signal]Signal{SignalImageFsAvailable: SignalContainerFsAvailable, SignalImageFsInodesFree: SignalContainerFsInodesFree}
	case dedicatedImageFs == splitContainerFs:
		from = map[Signal]Signal{SignalNodeFsAvailable: SignalContainerFsAvailable, SignalNodeFsInodesFree: SignalContainerFsInodesFree}
	}
	out := make([]Threshold, 0, len(thresholds)+2)
	var derived []Threshold
	for _, t := range thresholds {
		if isContainerFs(t.Signal) {
			continue
		}
		out = append(out, t)
		if to, ok := from[t.Signal]; ok {
			t.Signal = to
			derived = append(derived, t)
		}
	}
	return append(out, derived...)
}
