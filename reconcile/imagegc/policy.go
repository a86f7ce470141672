package imagegc

import (
	"errors"
	"fmt"
	"time"
)

// Policy is when images are collected, kubelet's ImageGCPolicy, set by
// kubelet's flags --image-gc-high-threshold, --image-gc-low-threshold,
// --image-minimum-gc-age and --image-maximum-gc-age.
type Policy struct {
	// HighThresholdPercent: at or above this usage of the image file system,
	// collection frees space. 100 turns that off.
	HighThresholdPercent int
	// LowThresholdPercent is the usage collection frees space down to.
	LowThresholdPercent int
	// MinAge: an image first seen less than this long ago is never removed
	// for space: it may have just been pulled for a container about to start.
	MinAge time.Duration
	// MaxAge: an unused image not used for longer than this is removed
	// whatever the usage, once jetlet has run that long. 0 turns that off.
	MaxAge time.Duration
}

// DefaultPolicy is kubelet's defaults: 85%, 80%, 2m, no maximum age.
func DefaultPolicy() Policy {
	return Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}
}

// ErrInvalidPolicy wraps every error of Policy.Validate.
var ErrInvalidPolicy = errors.New("invalid image garbage collection policy")

// Validate reports every setting kubelet's configuration validation
// refuses, each naming its flag, and a negative minimum age.
func (p Policy) Validate() error {
	var errs []error
	invalid := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...))
	}
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		invalid("--image-gc-high-threshold %d must be between 0 and 100, inclusive", p.HighThresholdPercent)
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		invalid("--image-gc-low-threshold %d must be between 0 and 100, inclusive", p.LowThresholdPercent)
	}
	if p.LowThresholdPercent >= p.HighThresholdPercent {
		invalid("--image-gc-low-threshold %d must be less than --image-gc-high-threshold %d", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if p.MinAge < 0 {
		invalid("--image-minimum-gc-age %s must not be negative", p.MinAge)
	}
	if p.MaxAge < 0 {
		invalid("--image-maximum-gc-age %s must not be negative", p.MaxAge)
	}
	if p.MaxAge > 0 && p.MaxAge <= p.MinAge {
		invalid("--image-maximum-gc-age %s must be greater than --image-minimum-gc-age %s", p.MaxAge, p.MinAge)
	}
	return errors.Join(errs...)
}

// collects reports whether collection does anything at all: kubelet turns
// it off when the high threshold is 100 and there is no maximum age.
func (p Policy) collects() bool {
	return p.HighThresholdPercent < 100 || p.MaxAge > 0
}
