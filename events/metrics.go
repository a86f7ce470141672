package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what the publishers could not do at once.
type Metrics struct {
	PublishFailures *prometheus.CounterVec
	EventsDropped   prometheus.Counter
	EventsBuffered  prometheus.Gauge
	// EventsStored counts the events not published because their pod's
	// ledger says the stream holds them: the same fact seen again.
	EventsStored prometheus.Counter
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
		EventsStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_events_already_stored_total",
			Help: "Lifecycle events not published because JETLET_EVENTS already holds their id (a fact seen again).",
		}),
	}
	for _, kind := range []string{"result", "event", "status", "ledger"} {
		m.PublishFailures.WithLabelValues(kind) // present at 0 from the start
	}
	if reg != nil {
		reg.MustRegister(m.PublishFailures, m.EventsDropped, m.EventsBuffered, m.EventsStored)
	}
	return m
}
