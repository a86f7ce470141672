package eviction

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func observed(available, capacity string) Observation {
	return Observation{Available: resource.MustParse(available), Capacity: resource.MustParse(capacity)}
}

func TestThresholdsMet(t *testing.T) {
	hard := Threshold{Signal: SignalMemoryAvailable, Value: ThresholdValue{Quantity: quantity("1Gi")}, MinReclaim: &ThresholdValue{Quantity: quantity("500Mi")}}
	percent := Threshold{Signal: SignalNodeFsAvailable, Value: ThresholdValue{Percentage: 0.1}}
	tests := []struct {
		name              string
		thresholds        []Threshold
		signals           map[Signal]Observation
		enforceMinReclaim bool
		want              []Threshold
	}{
		{name: "empty"},
		{name: "met", thresholds: []Threshold{hard}, signals: map[Signal]Observation{SignalMemoryAvailable: observed("500Mi", "10Gi")}, want: []Threshold{hard}},
		{name: "not met", thresholds: []Threshold{hard}, signals: map[Signal]Observation{SignalMemoryAvailable: observed("2Gi", "10Gi")}},
		{name: "exactly at the threshold is not met", thresholds: []Threshold{hard}, signals: map[Signal]Observation{SignalMemoryAvailable: observed("1Gi", "10Gi")}},
		{name: "min reclaim met", thresholds: []Threshold{hard}, signals: map[Signal]Observation{SignalMemoryAvailable: observed("1Gi", "10Gi")}, enforceMinReclaim: true, want: []Threshold{hard}},
		{name: "min reclaim not met", thresholds: []Threshold{hard}, signals: map[Signal]Observation{SignalMemoryAvailable: observed("2Gi", "10Gi")}, enforceMinReclaim: true},
		{name: "percentage of capacity met", thresholds: []Threshold{percent}, signals: map[Signal]Observation{SignalNodeFsAvailable: observed("9Gi", "100Gi")}, want: []Threshold{percent}},
		{name: "percentage of capacity not met", thresholds: []Threshold{percent}, signals: map[Signal]Observation{SignalNodeFsAvailable: observed("11Gi", "100Gi")}},
		{name: "a signal not observed is not met", thresholds: []Threshold{hard, percent}, signals: map[Signal]Observation{SignalNodeFsAvailable: observed("1Gi", "100Gi")}, want: []Threshold{percent}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := thresholdsMet(tc.thresholds, tc.signals, tc.enforceMinReclaim); !slices.Equal(got, tc.want) {
				t.Fatalf("met = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestThresholdsMetGracePeriod(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hard := Threshold{Signal: SignalMemoryAvailable, Value: ThresholdValue{Quantity: quantity("1Gi")}}
	soft := Threshold{Signal: SignalMemoryAvailable, Value: ThresholdValue{Quantity: quantity("2Gi")}, GracePeriod: time.Minute}
	tests := []struct {
		name      string
		firstMet  time.Time
		threshold Threshold
		due       bool
	}{
		{"hard: at once", now, hard, true},
		{"soft: not before its grace period", now.Add(-59 * time.Second), soft, false},
		{"soft: once its grace period is over", now.Add(-time.Minute), soft, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first := thresholdsFirstObservedAt([]Threshold{tc.threshold}, map[Threshold]time.Time{tc.threshold: tc.firstMet}, now)
			got := thresholdsMetGracePeriod([]Threshold{tc.threshold}, first, now)
			if (len(got) == 1) != tc.due {
				t.Fatalf("due = %v; want %v", got, tc.due)
			}
		})
	}
	// A threshold met for the first time is first met now.
	if at := thresholdsFirstObservedAt([]Threshold{soft}, nil, now); !at[soft].Equal(now) {
		t.Errorf("first observed at %v; want now", at[soft])
	}
}

func TestNodeConditionsObservedSince(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	period := 5 * time.Minute
	last := nodeConditionsLastObservedAt(
		nodeConditions([]Threshold{{Signal: SignalNodeFsAvailable}, {Signal: SignalImageFsInodesFree}, {Signal: SignalPIDAvailable}}),
		map[corev1.NodeConditionType]time.Time{corev1.NodeMemoryPressure: now.Add(-period), corev1.NodeDiskPressure: now.Add(-time.Hour)},
		now)
	if !last[corev1.NodeDiskPressure].Equal(now) || !last[corev1.NodeMemoryPressure].Equal(now.Add(-period)) {
		t.Fatalf("last observed = %v", last)
	}
	got := nodeConditionsObservedSince(last, period, now)
	want := []corev1.NodeConditionType{corev1.NodeDiskPressure, corev1.NodePIDPressure}
	if !slices.Equal(got, want) {
		t.Fatalf("conditions = %v; want %v (MemoryPressure's transition period is over)", got, want)
	}
	if got := nodeConditionsObservedSince(last, period, now.Add(period-time.Nanosecond)); !slices.Equal(got, want) {
		t.Fatalf("just before the period ends: %v; want %v", got, want)
	}
	if got := nodeConditionsObservedSince(last, period, now.Add(period)); len(got) != 0 {
		t.Fatalf("once the period is over: %v; want none", got)
	}
}

func TestSortByEvictionPriority(t *testing.T) {
	thresholds := []Threshold{{Signal: SignalNodeFsAvailable}, {Signal: SignalPIDAvailable}, {Signal: SignalMemoryAvailable}, {Signal: SignalImageFsAvailable}}
	sortByEvictionPriority(thresholds)
	var got []Signal
	for _, th := range thresholds {
		got = append(got, th.Signal)
	}
	want := []Signal{SignalMemoryAvailable, SignalNodeFsAvailable, SignalPIDAvailable, SignalImageFsAvailable}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v; want memory first, the rest as they were: %v", got, want)
	}
}
