package consumer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetlet/jetlet/schemas"
)

type metrics struct {
	intents      *prometheus.CounterVec
	syncDuration prometheus.Histogram
	deadLetters  prometheus.Counter
	naks         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetlet_intents_total",
			Help: "Intents answered, by outcome.",
		}, []string{"outcome"}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jetlet_sync_duration_seconds",
			Help:    "Duration of pod syncs, from intent taken to result decided.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_dead_letters_total",
			Help: "Intents no pod could be read from, copied to the dead-letter subject.",
		}),
		naks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_intent_naks_total",
			Help: "Intents handed back to JetStream for redelivery after a transient failure.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.intents, m.syncDuration, m.deadLetters, m.naks)
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
