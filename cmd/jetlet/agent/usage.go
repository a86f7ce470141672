package agent

import (
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/reconcile/stats"
	"github.com/jetlet/jetlet/schemas"
)

// newStatsProviders makes the node's two measurers: one for its record, one
// for the node service's stats endpoint, so that neither's asking
// shortens the other's CPU window. A record sent early for a change keeps
// the rate of the one before (half a heartbeat apart at least).
func newStatsProviders(node string, rt stats.Runtime) (record, service *stats.Provider, err error) {
	if record, err = stats.New(rt, stats.Config{Node: node, MinWindow: status.HeartbeatPeriod / 2}); err != nil {
		return nil, nil, err
	}
	service, err = stats.New(rt, stats.Config{Node: node})
	return record, service, err
}

// nodeUsage is the node's usage for its record: cpu over the window since
// the previous record, memory its working set; nil when it cannot be
// measured (the record goes out without it).
func nodeUsage(p *stats.Provider, log zerolog.Logger) corev1.ResourceList {
	n, err := p.Node()
	if err != nil {
		log.Warn().Err(err).Msg("node usage not measured for its record")
		return nil
	}
	if usage := schemas.ResourceUsage(n.CPU, n.Memory); len(usage) > 0 {
		return usage
	}
	return nil
}
