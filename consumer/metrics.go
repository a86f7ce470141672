package consumer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetlet/jetlet/schemas"
)

type metrics struct {
	intents     *prometheus.CounterVec
	deadLetters prometheus.Counter
	naks        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetlet_intents_total",
			Help: "Intents answered, by outcome.",
		}, []string{"outcome"}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_dead_letters_total",
			Help: "Intents no pod could be read from, copied to the dead-letter subject.",
		}),
		naks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_intent_naks_total",
			Help: "Intents handed back to JetStream for redelivery after a transient failure.",
		}),
	}
	for _, o := range []schemas.Outcome{schemas.OutcomeSynced, schemas.OutcomeFailed, schemas.OutcomeRejected,
		schemas.OutcomeSuperseded, schemas.OutcomeStale} {
		m.intents.WithLabelValues(string(o)) // present at 0 from the start
	}
	if reg != nil {
		reg.MustRegister(m.intents, m.deadLetters, m.naks)
	}
	return m
}
