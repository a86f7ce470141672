package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts the events the publisher could not publish at once, and
// those it did not publish again. (Its publish failures are counted with the
// results' and statuses' in natsjs.NewPublishFailures.)
type Metrics struct {
	EventsDropped  prometheus.Counter
	EventsBuffered prometheus.Gauge
	// EventsStored counts the events not published because their pod's
	// ledger says the stream holds them: the same fact seen again.
	EventsStored prometheus.Counter
}

// NewMetrics creates the event publisher's metrics and registers them with reg
// (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
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
	if reg != nil {
		reg.MustRegister(m.EventsDropped, m.EventsBuffered, m.EventsStored)
	}
	return m
}
