package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/eviction"
	"github.com/jetlet/jetlet/reconcile/imagegc"
	"github.com/jetlet/jetlet/reconcile/nodeshutdown"
	"github.com/jetlet/jetlet/reconcile/nodestatus"
)

// defaultMaxPods is kubelet's --max-pods default.
const defaultMaxPods = 110

// nodeFlags are the flags of what the node is and what it admits (docs/contract.md
// section 12), as kubelet's, and what validate makes of them.
type nodeFlags struct {
	maxPods        int
	kubeReserved   string
	systemReserved string
	nodeLabels     string
	taints         string
	podSecurity    string
	// Node-pressure eviction (reconcile/eviction).
	evictionHard, evictionSoft, evictionSoftGrace, evictionMinReclaim string
	evictionMaxPodGrace                                               int64
	evictionTransition                                                time.Duration
	// Image garbage collection (reconcile/imagegc).
	imageGC imagegc.Policy
	// Graceful node shutdown (reconcile/nodeshutdown): the two-flag form
	// and the by-priority form (PRIORITY=DURATION values).
	shutdownGrace, shutdownGraceCritical time.Duration
	shutdownGraceByPriority              []string

	// Parsed by validate.
	reserved []corev1.ResourceList // --kube-reserved, --system-reserved
	labels   map[string]string     // --node-labels
	taintSet []corev1.Taint        // --register-with-taints
	level    admission.Level
	// thresholds are the eviction thresholds (--eviction-*).
	thresholds []eviction.Threshold
	// shutdown is the graceful node shutdown (--shutdown-grace-period*).
	shutdown nodeshutdown.Config
}

func (n *nodeFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&n.maxPods, "max-pods", defaultMaxPods, "most pods the node runs at once; more are refused at admission (OutOfpods)")
	fs.StringVar(&n.kubeReserved, "kube-reserved", "", "resources set aside for jetlet and the runtime, kept out of allocatable (cpu=100m,memory=256Mi,ephemeral-storage=1Gi)")
	fs.StringVar(&n.systemReserved, "system-reserved", "", "resources set aside for the operating system, kept out of allocatable (same form as --kube-reserved)")
	fs.StringVar(&n.nodeLabels, "node-labels", "", "labels of the node besides kubernetes.io/hostname, os and arch (key=value,...), matched by pods' nodeSelector and node affinity")
	fs.StringVar(&n.taints, "register-with-taints", "", "taints of the node (key=value:NoSchedule,key:NoExecute,...); a pod that does not tolerate a NoSchedule or NoExecute one is refused (TaintToleration)")
	fs.StringVar(&n.evictionHard, "eviction-hard", eviction.DefaultEvictionHard, "hard eviction thresholds (signal<quantity or percentage, comma-separated): met, a pod is evicted at once; they are kept out of allocatable too")
	fs.StringVar(&n.evictionSoft, "eviction-soft", "", "soft eviction thresholds (as --eviction-hard): met for their grace period, a pod is evicted")
	fs.StringVar(&n.evictionSoftGrace, "eviction-soft-grace-period", "", "how long each soft threshold must be met before a pod is evicted (signal=duration, comma-separated)")
	fs.StringVar(&n.evictionMinReclaim, "eviction-minimum-reclaim", "", "how much beyond a threshold an eviction frees at least (signal=quantity or percentage, comma-separated)")
	fs.Int64Var(&n.evictionMaxPodGrace, "eviction-max-pod-grace-period", 0, "most seconds a pod evicted for a soft threshold may take to stop (its own grace period if lower)")
	fs.DurationVar(&n.evictionTransition, "eviction-pressure-transition-period", eviction.DefaultPressureTransitionPeriod, "how long a pressure condition stays True after its threshold was last met")
	fs.IntVar(&n.imageGC.HighThresholdPercent, "image-gc-high-threshold", imagegc.DefaultPolicy().HighThresholdPercent, "image file system use (percent) at which unused images are removed")
	fs.IntVar(&n.imageGC.LowThresholdPercent, "image-gc-low-threshold", imagegc.DefaultPolicy().LowThresholdPercent, "image file system use (percent) image garbage collection frees down to")
	fs.DurationVar(&n.imageGC.MinAge, "image-minimum-gc-age", imagegc.DefaultPolicy().MinAge, "youngest an unused image may be to be removed")
	fs.DurationVar(&n.imageGC.MaxAge, "image-maximum-gc-age", imagegc.DefaultPolicy().MaxAge, "an image unused for longer is removed whatever the disk use; 0: never")
	fs.DurationVar(&n.shutdownGrace, "shutdown-grace-period", 0, "how long the host's shutdown waits for the node's pods to stop, through a systemd-logind delay inhibitor lock (kubelet's shutdownGracePeriod); 0: no graceful shutdown")
	fs.DurationVar(&n.shutdownGraceCritical, "shutdown-grace-period-critical-pods", 0, "the part of --shutdown-grace-period kept for the critical pods (spec.priority >= 2000000000), stopped after the others")
	fs.StringSliceVar(&n.shutdownGraceByPriority, "shutdown-grace-period-by-pod-priority", nil, "graceful shutdown by pod priority instead of the two flags above: PRIORITY=DURATION, repeated or comma-separated (0=60s,2000000000=10s); the pods of the lowest priority stop first, each group given its duration")
	fs.StringVar(&n.podSecurity, "pod-security", string(admission.LevelBaseline), "the Pod Security Standards level pods must meet: privileged, baseline or restricted; --allow-privileged is privileged")
}

// validate parses the flags; allowPrivileged (--allow-privileged) is the
// privileged level, unless --pod-security (levelSet) says another.
func (n *nodeFlags) validate(allowPrivileged, levelSet bool) error {
	if n.maxPods < 1 {
		return fmt.Errorf("--max-pods %d: must be at least 1", n.maxPods)
	}
	var errs []error
	for _, r := range []struct{ flag, value string }{{"kube-reserved", n.kubeReserved}, {"system-reserved", n.systemReserved}} {
		list, err := nodestatus.ParseReserved(r.value)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", r.flag, err))
		}
		n.reserved = append(n.reserved, list)
	}
	var err error
	if n.labels, err = nodestatus.ParseLabels(n.nodeLabels); err != nil {
		errs = append(errs, fmt.Errorf("--node-labels: %w", err))
	}
	if n.taintSet, err = nodestatus.ParseTaints(n.taints); err != nil {
		errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
	}
	if n.level, err = admission.ParseLevel(n.podSecurity); err != nil {
		errs = append(errs, fmt.Errorf("--pod-security: %w", err))
	}
	if n.thresholds, err = eviction.ParseThresholds(n.evictionHard, n.evictionSoft, n.evictionSoftGrace, n.evictionMinReclaim); err != nil {
		errs = append(errs, fmt.Errorf("--eviction-*: %w", err))
	}
	if n.evictionMaxPodGrace < 0 {
		errs = append(errs, fmt.Errorf("--eviction-max-pod-grace-period %d: must not be negative", n.evictionMaxPodGrace))
	}
	if n.evictionTransition <= 0 {
		errs = append(errs, fmt.Errorf("--eviction-pressure-transition-period %s: must be positive", n.evictionTransition))
	}
	if err := n.imageGC.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, n.validateShutdown())
	if allowPrivileged {
		switch {
		case !levelSet:
			n.level = admission.LevelPrivileged
		case n.level != admission.LevelPrivileged:
			errs = append(errs, fmt.Errorf("--allow-privileged is --pod-security privileged, not %s: give one of them", n.podSecurity))
		}
	}
	return errors.Join(errs...)
}

// validateShutdown parses the --shutdown-grace-period* flags and applies
// kubelet's rules to them.
func (n *nodeFlags) validateShutdown() error {
	n.shutdown = nodeshutdown.Config{GracePeriod: n.shutdownGrace, GracePeriodCriticalPods: n.shutdownGraceCritical}
	var errs []error
	for _, v := range n.shutdownGraceByPriority {
		g, err := nodeshutdown.ParsePriorityGrace(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("--shutdown-grace-period-by-pod-priority %w", err))
			continue
		}
		n.shutdown.ByPodPriority = append(n.shutdown.ByPodPriority, g)
	}
	return errors.Join(append(errs, n.shutdown.Validate())...)
}
