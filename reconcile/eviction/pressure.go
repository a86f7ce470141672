package eviction

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// pressureConditions are the conditions eviction sets, in the order the node
// record and an admission refusal list them.
var pressureConditions = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// thresholdsMet are those of thresholds whose signal's available amount is
// below them; with enforceMinReclaim, below them plus their minimum reclaim
// (a threshold met before is resolved only once that much is back). A
// threshold whose signal was not observed is not met.
func thresholdsMet(thresholds []Threshold, signals map[Signal]Observation, enforceMinReclaim bool) []Threshold {
	var met []Threshold
	for _, t := range thresholds {
		observed, ok := signals[t.Signal]
		if !ok {
			continue
		}
		amount := t.Value.amount(observed.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			amount.Add(t.MinReclaim.amount(observed.Capacity))
		}
		if amount.Cmp(observed.Available) > 0 {
			met = append(met, t)
		}
	}
	return met
}

// mergeThresholds is a with those of b it lacks.
func mergeThresholds(a, b []Threshold) []Threshold {
	for _, t := range b {
		if !slices.Contains(a, t) {
			a = append(a, t)
		}
	}
	return a
}

// thresholdsFirstObservedAt is when each of met was first met: when it was
// already met before, that time, else now.
func thresholdsFirstObservedAt(met []Threshold, before map[Threshold]time.Time, now time.Time) map[Threshold]time.Time {
	at := make(map[Threshold]time.Time, len(met))
	for _, t := range met {
		if first, ok := before[t]; ok {
			at[t] = first
		} else {
			at[t] = now
		}
	}
	return at
}

// thresholdsMetGracePeriod are those of met that have been met for their
// grace period, in met's order.
func thresholdsMetGracePeriod(met []Threshold, firstObservedAt map[Threshold]time.Time, now time.Time) []Threshold {
	var due []Threshold
	for _, t := range met {
		if now.Sub(firstObservedAt[t]) >= t.GracePeriod {
			due = append(due, t)
		}
	}
	return due
}

// nodeConditions are the conditions met thresholds set, grace periods aside:
// a node under a soft threshold is under pressure before pods are evicted.
func nodeConditions(met []Threshold) []corev1.NodeConditionType {
	var conditions []corev1.NodeConditionType
	for _, t := range met {
		if c := signalCondition[t.Signal]; !slices.Contains(conditions, c) {
			conditions = append(conditions, c)
		}
	}
	return conditions
}

// nodeConditionsLastObservedAt is when each condition was last set: now for
// those set now, the time before for the others.
func nodeConditionsLastObservedAt(conditions []corev1.NodeConditionType, before map[corev1.NodeConditionType]time.Time, now time.Time) map[corev1.NodeConditionType]time.Time {
	at := make(map[corev1.NodeConditionType]time.Time, len(pressureConditions))
	for c, t := range before {
		at[c] = t
	}
	for _, c := range conditions {
		at[c] = now
	}
	return at
}

// nodeConditionsObservedSince are the conditions set within the last period
// (--eviction-pressure-transition-period), so that a node hovering about a
// threshold does not flap between pressure and none.
func nodeConditionsObservedSince(lastObservedAt map[corev1.NodeConditionType]time.Time, period time.Duration, now time.Time) []corev1.NodeConditionType {
	var conditions []corev1.NodeConditionType
	for _, c := range pressureConditions {
		if at, ok := lastObservedAt[c]; ok && now.Sub(at) < period {
			conditions = append(conditions, c)
		}
	}
	return conditions
}

// sortByEvictionPriority puts memory thresholds first, the others in their
// order: memory is reclaimed before anything else.
func sortByEvictionPriority(thresholds []Threshold) {
	slices.SortStableFunc(thresholds, func(a, b Threshold) int {
		return cmpBool(a.Signal == SignalMemoryAvailable, b.Signal == SignalMemoryAvailable)
	})
}

// cmpBool orders true before false.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}
