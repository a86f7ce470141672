package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeName(t *testing.T) {
	tests := []struct{ nodeName, want string }{
		{"", ""},
		{"n1", ""},
		{"n2", `Predicate NodeName failed: node(s) didn't match the requested node name: the pod's spec.nodeName is "n2", this node is "n1"`},
	}
	for _, tt := range tests {
		pod := testPod("web")
		pod.Spec.NodeName = tt.nodeName
		assertVerdict(t, "nodeName "+tt.nodeName, checkNodeName(testNode(), pod, nil), ReasonNodeName, tt.want)
	}
}

// expr is a matchExpressions or matchFields requirement.
func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// required is a required node affinity of the given terms.
func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func labels(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func fields(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: reqs}
}

// TestNodeAffinity matches against testNode: n1, labelled zone=a,
// disktype=ssd, cores=8.
func TestNodeAffinity(t *testing.T) {
	const prefix = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector: "
	tests := []struct {
		name     string
		selector map[string]string
		affinity *corev1.Affinity
		want     string // the message after prefix; "" is admitted
	}{
		{name: "neither"},
		{name: "nodeSelector matches", selector: map[string]string{"zone": "a", "disktype": "ssd"}},
		{
			name:     "nodeSelector of another value",
			selector: map[string]string{"zone": "b"},
			want:     "nodeSelector zone=b: node n1 has zone=a",
		},
		{
			name:     "nodeSelector of a label the node lacks, and another value, in key order",
			selector: map[string]string{"zone": "b", "gpu": "true", "disktype": "ssd"},
			want:     "nodeSelector gpu=true: node n1 has no label gpu; nodeSelector zone=b: node n1 has zone=a",
		},
		{name: "In", affinity: required(labels(expr("zone", corev1.NodeSelectorOpIn, "a", "b")))},
		{
			name:     "In, not matched",
			affinity: required(labels(expr("zone", corev1.NodeSelectorOpIn, "b", "c"))),
			want:     "no term of the required node affinity matched: term 0: zone In [b c]: node n1 has zone=a",
		},
		{
			name:     "In, of a label the node lacks",
			affinity: required(labels(expr("rack", corev1.NodeSelectorOpIn, "r1"))),
			want:     "no term of the required node affinity matched: term 0: rack In [r1]: node n1 has no label rack",
		},
		{name: "NotIn", affinity: required(labels(expr("zone", corev1.NodeSelectorOpNotIn, "b")))},
		{name: "NotIn, of a label the node lacks", affinity: required(labels(expr("rack", corev1.NodeSelectorOpNotIn, "r1")))},
		{
			name:     "NotIn, not matched",
			affinity: required(labels(expr("zone", corev1.NodeSelectorOpNotIn, "a"))),
			want:     "no term of the required node affinity matched: term 0: zone NotIn [a]: node n1 has zone=a",
		},
		{name: "Exists", affinity: required(labels(expr("disktype", corev1.NodeSelectorOpExists)))},
		{
			name:     "Exists, not matched",
			affinity: required(labels(expr("gpu", corev1.NodeSelectorOpExists))),
			want:     "no term of the required node affinity matched: term 0: gpu Exists: node n1 has no label gpu",
		},
		{name: "DoesNotExist", affinity: required(labels(expr("gpu", corev1.NodeSelectorOpDoesNotExist)))},
		{
			name:     "DoesNotExist, not matched",
			affinity: required(labels(expr("disktype", corev1.NodeSelectorOpDoesNotExist))),
			want:     "no term of the required node affinity matched: term 0: disktype DoesNotExist: node n1 has disktype=ssd",
		},
		{name: "Gt", affinity: required(labels(expr("cores", corev1.NodeSelectorOpGt, "4")))},
		{
			name:     "Gt, not matched",
			affinity: required(labels(expr("cores", corev1.NodeSelectorOpGt, "8"))),
			want:     "no term of the required node affinity matched: term 0: cores Gt [8]: node n1 has cores=8",
		},
		{name: "Lt", affinity: required(labels(expr("cores", corev1.NodeSelectorOpLt, "16")))},
		{
			name:     "Lt, not matched",
			affinity: required(labels(expr("cores", corev1.NodeSelectorOpLt, "8"))),
			want:     "no term of the required node affinity matched: term 0: cores Lt [8]: node n1 has cores=8",
		},
		{
			name:     "Gt of a value that is no number",
			affinity: required(labels(expr("cores", corev1.NodeSelectorOpGt, "many"))),
			want: "no term of the required node affinity matched: term 0: " +
				`cores Gt [many] is invalid: Invalid value: "many": for 'Gt', 'Lt' operators, the value must be an integer`,
		},
		{
			name:     "an unknown operator",
			affinity: required(labels(expr("zone", "Near", "a"))),
			want: "no term of the required node affinity matched: term 0: " +
				`zone Near [a] is invalid: Unsupported value: "Near": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"`,
		},
		{name: "matchFields metadata.name", affinity: required(fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n1")))},
		{
			name:     "matchFields metadata.name of another node",
			affinity: required(fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n2"))),
			want:     "no term of the required node affinity matched: term 0: metadata.name In [n2]: the node is n1",
		},
		{
			name:     "matchFields metadata.name NotIn this node",
			affinity: required(fields(expr("metadata.name", corev1.NodeSelectorOpNotIn, "n1"))),
			want:     "no term of the required node affinity matched: term 0: metadata.name NotIn [n1]: the node is n1",
		},
		{
			name: "terms are ORed: the second matches",
			affinity: required(
				labels(expr("zone", corev1.NodeSelectorOpIn, "b")),
				fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n1")),
			),
		},
		{
			name: "terms are ORed: none matches, each explained",
			affinity: required(
				labels(expr("zone", corev1.NodeSelectorOpIn, "b")),
				fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n2")),
			),
			want: "no term of the required node affinity matched: " +
				"term 0: zone In [b]: node n1 has zone=a; term 1: metadata.name In [n2]: the node is n1",
		},
		{
			name: "a term's requirements are ANDed: the first it fails is named",
			affinity: required(corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					expr("zone", corev1.NodeSelectorOpIn, "a"),
					expr("disktype", corev1.NodeSelectorOpIn, "hdd"),
				},
				MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "n2")},
			}),
			want: "no term of the required node affinity matched: term 0: disktype In [hdd]: node n1 has disktype=ssd",
		},
		{
			name:     "a term of expressions and fields, both matched",
			affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{expr("zone", corev1.NodeSelectorOpIn, "a")}, MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "n1")}}),
		},
		{
			name:     "an empty term matches no node",
			affinity: required(corev1.NodeSelectorTerm{}),
			want:     "no term of the required node affinity matched: term 0: empty, matches no node",
		},
		{
			name:     "no terms match no node",
			affinity: required(),
			want:     "the required node affinity has no terms and matches no node",
		},
		{
			name:     "nodeSelector and affinity are ANDed: the selector fails",
			selector: map[string]string{"zone": "b"},
			affinity: required(labels(expr("zone", corev1.NodeSelectorOpIn, "a"))),
			want:     "nodeSelector zone=b: node n1 has zone=a",
		},
		{
			name:     "nodeSelector and affinity are ANDed: the affinity fails",
			selector: map[string]string{"zone": "a"},
			affinity: required(labels(expr("disktype", corev1.NodeSelectorOpIn, "hdd"))),
			want:     "no term of the required node affinity matched: term 0: disktype In [hdd]: node n1 has disktype=ssd",
		},
		{
			name:     "preferred affinity is not required",
			affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: labels(expr("zone", corev1.NodeSelectorOpIn, "b"))}}}},
		},
	}
	for _, tt := range tests {
		pod := testPod("web")
		pod.Spec.NodeSelector = tt.selector
		pod.Spec.Affinity = tt.affinity
		want := tt.want
		if want != "" {
			want = prefix + want
		}
		assertVerdict(t, tt.name, checkNodeAffinity(testNode(), pod, nil), ReasonNodeAffinity, want)
	}
}

// assertVerdict checks a check's verdict: admitted when message is "",
// else refused with reason and message.
func assertVerdict(t *testing.T, name string, got Verdict, reason, message string) {
	t.Helper()
	want := admitted
	if message != "" {
		want = Verdict{Reason: reason, Message: message}
	}
	if got != want {
		t.Errorf("%s:\ngot  %+v\nwant %+v", name, got, want)
	}
}
