package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what the publishers could not do at once.
type Metrics struct {
	PublishFailures *prometheus.CounterVec
	EventsDropped   prometheus.Counter
	EventsBuffered  prometheus.Gauge
}

// NewMetrics creates the publishers' metrics and registers them with reg
// (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		PublishFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetlet_publish_failures_total",
			Help: "Publishes to JetStream that failed (and were retried), by kind of message.",
		}, []string{"kind"}),
		EventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_events_dropped_total",
			Help: "Lifecycle events dropped because the buffer was full; the next relist re-derives them.",
		}),
		EventsBuffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jetlet_events_buffered",
			Help: "Lifecycle events waiting to be published.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.PublishFailures, m.EventsDropped, m.EventsBuffered)
	}
	return m
}
