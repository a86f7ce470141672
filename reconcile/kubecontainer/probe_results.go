package kubecontainer

// ProbeResult is the latest result of one probe of one container instance,
// after kubelet's prober/results.Result.
type ProbeResult int

const (
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
)

// ProbeResults gives the latest result of one kind of probe (liveness,
// readiness or startup) by container id: reconcile/prober's caches, or
// without a prober the defaults below.
type ProbeResults interface {
	Get(containerID string) (ProbeResult, bool)
}

// NoProbeResults knows no result: no container is ever killed for a probe.
type NoProbeResults struct{}

// Get implements ProbeResults.
func (NoProbeResults) Get(string) (ProbeResult, bool) { return ProbeUnknown, false }

// AllReady answers Success for every container. It is the default readiness
// and startup: without a prober, a running container with such probes is
// reported started and ready rather than never.
type AllReady struct{}

// Get implements ProbeResults.
func (AllReady) Get(string) (ProbeResult, bool) { return ProbeSuccess, true }

// ProbeResultsFunc adapts a function to ProbeResults.
type ProbeResultsFunc func(containerID string) (ProbeResult, bool)

// Get implements ProbeResults.
func (f ProbeResultsFunc) Get(id string) (ProbeResult, bool) { return f(id) }
