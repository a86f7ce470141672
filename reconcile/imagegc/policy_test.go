package imagegc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Policy)
		want   []string // each must be in the error; none: valid
	}{
		{name: "kubelet's defaults", change: func(*Policy) {}},
		{name: "high 100 turns collection for space off", change: func(p *Policy) { p.HighThresholdPercent = 100 }},
		{name: "low 0", change: func(p *Policy) { p.LowThresholdPercent = 0 }},
		{name: "a maximum age above the minimum", change: func(p *Policy) { p.MaxAge = 2*time.Minute + time.Second }},
		{name: "high above 100", change: func(p *Policy) { p.HighThresholdPercent = 101 },
			want: []string{"--image-gc-high-threshold 101 must be between 0 and 100, inclusive"}},
		{name: "low negative", change: func(p *Policy) { p.LowThresholdPercent = -1 },
			want: []string{"--image-gc-low-threshold -1 must be between 0 and 100, inclusive"}},
		{name: "low equal to high", change: func(p *Policy) { p.LowThresholdPercent = 85 },
			want: []string{"--image-gc-low-threshold 85 must be less than --image-gc-high-threshold 85"}},
		{name: "low above high", change: func(p *Policy) { p.HighThresholdPercent, p.LowThresholdPercent = 50, 60 },
			want: []string{"--image-gc-low-threshold 60 must be less than --image-gc-high-threshold 50"}},
		{name: "negative minimum age", change: func(p *Policy) { p.MinAge = -time.Second },
			want: []string{"--image-minimum-gc-age -1s must not be negative"}},
		{name: "negative maximum age", change: func(p *Policy) { p.MaxAge = -time.Second },
			want: []string{"--image-maximum-gc-age -1s must not be negative"}},
		{name: "maximum age equal to the minimum", change: func(p *Policy) { p.MaxAge = 2 * time.Minute },
			want: []string{"--image-maximum-gc-age 2m0s must be greater than --image-minimum-gc-age 2m0s"}},
		{name: "every error at once", change: func(p *Policy) { p.HighThresholdPercent, p.LowThresholdPercent = 200, 300 },
			want: []string{"--image-gc-high-threshold 200", "--image-gc-low-threshold 300 must be between", "300 must be less than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			tt.change(&p)
			err := p.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", p, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("Validate(%+v) = %v, want ErrInvalidPolicy", p, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate(%+v) = %q, want it to say %q", p, err, w)
				}
			}
		})
	}
}

func TestNewRefusesAnInvalidPolicy(t *testing.T) {
	p := DefaultPolicy()
	p.LowThresholdPercent = 90
	if _, err := New(newFakeRuntime(), Config{Policy: p}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("New with low 90 > high 85: %v, want ErrInvalidPolicy", err)
	}
}
