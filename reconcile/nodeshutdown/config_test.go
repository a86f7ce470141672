package nodeshutdown

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // empty: valid
	}{
		{name: "disabled", cfg: Config{}},
		{name: "two flags", cfg: Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second}},
		{name: "all for critical pods", cfg: Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 30 * time.Second}},
		{name: "critical above the whole", cfg: Config{GracePeriod: 10 * time.Second, GracePeriodCriticalPods: 20 * time.Second}, want: "must be at most --shutdown-grace-period"},
		{name: "critical without the whole", cfg: Config{GracePeriodCriticalPods: time.Second}, want: "must be at most"},
		{name: "below a second", cfg: Config{GracePeriod: 500 * time.Millisecond}, want: "--shutdown-grace-period 500ms: must be 0 (disabled) or at least 1s"},
		{name: "negative", cfg: Config{GracePeriod: -time.Second}, want: "must be 0 (disabled) or at least 1s"},
		{name: "by priority", cfg: Config{ByPodPriority: []PriorityGrace{{0, 60}, {100000, 10}}}},
		{name: "both forms", cfg: Config{GracePeriod: time.Minute, ByPodPriority: []PriorityGrace{{0, 60}}}, want: "cannot be given with"},
		{name: "negative group", cfg: Config{ByPodPriority: []PriorityGrace{{0, -1}}}, want: "must not be negative"},
		{name: "priority twice", cfg: Config{ByPodPriority: []PriorityGrace{{5, 1}, {5, 2}}}, want: "priority 5 is given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestConfigGroups(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []PriorityGrace
		enabled bool
	}{
		{name: "disabled", cfg: Config{}},
		{
			name: "two flags: the rest first, then the critical pods",
			cfg:  Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second},
			want: []PriorityGrace{{0, 20}, {SystemCriticalPriority, 10}}, enabled: true,
		},
		{
			name: "no time for critical pods",
			cfg:  Config{GracePeriod: 30 * time.Second},
			want: []PriorityGrace{{0, 30}, {SystemCriticalPriority, 0}}, enabled: true,
		},
		{
			name: "by priority, sorted low to high",
			cfg:  Config{ByPodPriority: []PriorityGrace{{100000, 10}, {0, 60}, {1000, 120}}},
			want: []PriorityGrace{{0, 60}, {1000, 120}, {100000, 10}}, enabled: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.groups()
			if len(got) != len(tc.want) {
				t.Fatalf("groups = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("groups = %v, want %v", got, tc.want)
				}
			}
			if tc.cfg.Enabled() != tc.enabled {
				t.Fatalf("Enabled = %v, want %v", !tc.enabled, tc.enabled)
			}
		})
	}
	if got := requested(Config{ByPodPriority: []PriorityGrace{{0, 60}, {1000, 120}}}.groups()); got != 3*time.Minute {
		t.Fatalf("requested = %s, want 3m", got)
	}
}

func TestParsePriorityGrace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PriorityGrace
		err  string
	}{
		{in: "0=30s", want: PriorityGrace{0, 30}},
		{in: "2000000000=2m", want: PriorityGrace{SystemCriticalPriority, 120}},
		{in: "-100=0s", want: PriorityGrace{-100, 0}},
		{in: "30s", err: "want PRIORITY=DURATION"},
		{in: "high=30s", err: "not a 32-bit integer"},
		{in: "3000000000=30s", err: "not a 32-bit integer"},
		{in: "0=30", err: "not a duration"},
		{in: "0=1500ms", err: "whole seconds"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePriorityGrace(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParsePriorityGrace(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParsePriorityGrace(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
