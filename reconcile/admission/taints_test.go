package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTaints(t *testing.T) {
	const prefix = "Predicate TaintToleration failed: node(s) had untolerated taint "
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name        string
		taints      []corev1.Taint
		tolerations []corev1.Toleration
		want        string // after prefix; "" is admitted
	}{
		{name: "no taints"},
		{name: "NoSchedule, not tolerated", taints: []corev1.Taint{gpu}, want: "dedicated=gpu:NoSchedule"},
		{
			name:   "NoExecute, not tolerated",
			taints: []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}},
			want:   "maintenance:NoExecute",
		},
		{name: "PreferNoSchedule is a preference", taints: []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}}},
		{
			name:        "Equal, of key, value and effect",
			taints:      []corev1.Taint{gpu},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:        "no operator is Equal",
			taints:      []corev1.Taint{gpu},
			tolerations: []corev1.Toleration{{Key: "dedicated", Value: "gpu"}},
		},
		{
			name:        "Equal, of another value",
			taints:      []corev1.Taint{gpu},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "fpga"}},
			want:        "dedicated=gpu:NoSchedule",
		},
		{
			name:        "Exists, of the key",
			taints:      []corev1.Taint{gpu},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		},
		{
			name:        "Exists with an empty key tolerates every taint",
			taints:      []corev1.Taint{gpu, {Key: "maintenance", Effect: corev1.TaintEffectNoExecute}},
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		{
			name:        "an empty effect tolerates every effect",
			taints:      []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
		},
		{
			name:        "another effect",
			taints:      []corev1.Taint{gpu},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want:        "dedicated=gpu:NoSchedule",
		},
		{
			name:        "the first taint not tolerated is named",
			taints:      []corev1.Taint{gpu, {Key: "zone", Value: "dmz", Effect: corev1.TaintEffectNoExecute}},
			tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			want:        "zone=dmz:NoExecute",
		},
		{
			name:        "Gt tolerates nothing while its feature gate is off",
			taints:      []corev1.Taint{{Key: "cores", Value: "8", Effect: corev1.TaintEffectNoSchedule}},
			tolerations: []corev1.Toleration{{Key: "cores", Operator: corev1.TolerationOpGt, Value: "4"}},
			want:        "cores=8:NoSchedule",
		},
	}
	for _, tt := range tests {
		node := testNode()
		node.Taints = tt.taints
		pod := testPod("web")
		pod.Spec.Tolerations = tt.tolerations
		want := tt.want
		if want != "" {
			want = prefix + want
		}
		assertVerdict(t, tt.name, checkTaints(node, pod, nil), ReasonTaintToleration, want)
	}
}

func TestCordon(t *testing.T) {
	const refused = "Predicate NodeUnschedulable failed: node(s) were unschedulable: node n1 is cordoned " +
		"and the pod does not tolerate node.kubernetes.io/unschedulable:NoSchedule"
	tests := []struct {
		name          string
		unschedulable bool
		tolerations   []corev1.Toleration
		want          string
	}{
		{name: "not cordoned"},
		{name: "cordoned", unschedulable: true, want: refused},
		{
			name:          "cordoned, tolerated as DaemonSet pods tolerate it",
			unschedulable: true,
			tolerations:   []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name:          "cordoned, every taint tolerated",
			unschedulable: true,
			tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		{
			name:          "cordoned, tolerated for NoExecute only",
			unschedulable: true,
			tolerations:   []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want:          refused,
		},
	}
	for _, tt := range tests {
		node := testNode()
		node.Unschedulable = tt.unschedulable
		pod := testPod("web")
		pod.Spec.Tolerations = tt.tolerations
		assertVerdict(t, tt.name, checkCordon(node, pod, nil), ReasonNodeUnschedulable, tt.want)
	}
}
