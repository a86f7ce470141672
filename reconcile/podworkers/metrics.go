package podworkers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetlet/jetlet/schemas"
)

type metrics struct {
	syncDuration *prometheus.HistogramVec
}

// Outcomes of a sync, the jetlet_sync_duration_seconds label.
const (
	syncSucceeded = "success"
	syncBackOff   = "backoff" // only waiting out a back-off
	syncFailed    = "failure"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jetlet_sync_duration_seconds",
			Help:    "Duration of pod syncs, intent-driven and background, by outcome (success, backoff: only waiting out a back-off, failure).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
		}, []string{"outcome"}),
	}
	for _, o := range []string{syncSucceeded, syncBackOff, syncFailed} {
		m.syncDuration.WithLabelValues(o) // present at 0 from the start
	}
	if reg != nil {
		reg.MustRegister(m.syncDuration)
	}
	return m
}

var podsDesc = prometheus.NewDesc("jetlet_pods", "Pods with a desired state on this node, by the phase last stored.", []string{"phase"}, nil)

// podsCollector reports the pods per phase at scrape time.
type podsCollector struct{ counts func() schemas.PodCounts }

func (c podsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- podsDesc }

func (c podsCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.counts()
	for _, phase := range []schemas.PodPhase{schemas.PhasePending, schemas.PhaseRunning, schemas.PhaseSucceeded,
		schemas.PhaseFailed, schemas.PhaseTerminating, schemas.PhaseTerminated} {
		ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(counts.ByPhase[phase]), string(phase))
	}
}
