package eviction

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
)

// conditionWording is how kubelet's node status setters word each pressure
// condition, True and False.
var conditionWording = map[corev1.NodeConditionType]struct {
	trueReason, trueMessage, falseReason, falseMessage string
}{
	corev1.NodeMemoryPressure: {"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
	corev1.NodeDiskPressure:   {"KubeletHasDiskPressure", "kubelet has disk pressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
	corev1.NodePIDPressure:    {"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
}

// pressureCondition is condition t, True or not, as changed at since.
func pressureCondition(t corev1.NodeConditionType, pressure bool, since time.Time) schemas.NodeCondition {
	w := conditionWording[t]
	c := schemas.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: w.falseReason, Message: w.falseMessage, LastTransitionTime: since}
	if pressure {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, w.trueReason, w.trueMessage
	}
	return c
}

// Conditions are MemoryPressure, DiskPressure and PIDPressure as they stand,
// each with the time its status last changed (the manager's start for one
// that never did).
func (m *Manager) Conditions() []schemas.NodeCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.conditions)
}

// Pressure are the conditions now True, in Conditions' order: what
// admission refuses pods for.
func (m *Manager) Pressure() []corev1.NodeConditionType {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pressure []corev1.NodeConditionType
	for _, c := range m.conditions {
		if c.Status == corev1.ConditionTrue {
			pressure = append(pressure, c.Type)
		}
	}
	return pressure
}

// Changed receives after a condition's status changed, so that the node
// record is rewritten at once. Changes while nobody receives are coalesced.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// setPressure makes the conditions in pressure True and the others False,
// and says so on Changed when one changed.
func (m *Manager) setPressure(pressure []corev1.NodeConditionType, now time.Time) {
	m.mu.Lock()
	var changed []schemas.NodeCondition
	for i, c := range m.conditions {
		want := slices.Contains(pressure, c.Type)
		if want != (c.Status == corev1.ConditionTrue) {
			m.conditions[i] = pressureCondition(c.Type, want, now)
			changed = append(changed, m.conditions[i])
		}
	}
	m.mu.Unlock()
	for _, c := range changed {
		m.log.Info().Str("condition", string(c.Type)).Str("status", string(c.Status)).Msg(c.Message)
	}
	if len(changed) > 0 {
		select {
		case m.changed <- struct{}{}:
		default:
		}
	}
}
