package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// checkNodeName refuses a pod bound to another node.
func checkNodeName(node *Node, pod *corev1.Pod, _ *Held) Verdict {
	if pod.Spec.NodeName == "" || pod.Spec.NodeName == node.Name {
		return admitted
	}
	return Verdict{
		Reason: ReasonNodeName,
		Message: fmt.Sprintf("Predicate NodeName failed: node(s) didn't match the requested node name: "+
			"the pod's spec.nodeName is %q, this node is %q", pod.Spec.NodeName, node.Name),
	}
}

// checkNodeAffinity matches the pod's nodeSelector and required node
// affinity against the node's labels and name, as the scheduler and kubelet
// do (component-helpers' nodeaffinity), and on a mismatch says which
// selector or which requirement of each term the node failed: kubelet says
// only "didn't match Pod's node affinity/selector".
func checkNodeAffinity(node *Node, pod *corev1.Pod, _ *Held) Verdict {
	k8sNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels}}
	if match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(k8sNode); match {
		return admitted
	}
	message := "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
	if why := affinityMismatch(k8sNode, pod); why != "" {
		message += ": " + why
	}
	return Verdict{Reason: ReasonNodeAffinity, Message: message}
}

// affinityMismatch says what the node failed: the nodeSelector, which the
// library checks first, else the required node affinity.
func affinityMismatch(node *corev1.Node, pod *corev1.Pod) string {
	if why := nodeSelectorMismatch(node, pod.Spec.NodeSelector); why != "" {
		return why
	}
	if affinity := pod.Spec.Affinity; affinity != nil && affinity.NodeAffinity != nil &&
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return requiredAffinityMismatch(node, affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return ""
}

// nodeSelectorMismatch names the nodeSelector's labels the node lacks or
// holds with another value, in key order; empty when they all match.
func nodeSelectorMismatch(node *corev1.Node, selector map[string]string) string {
	var mismatches []string
	for _, key := range slices.Sorted(maps.Keys(selector)) {
		if value, has := node.Labels[key]; !has || value != selector[key] {
			mismatches = append(mismatches, fmt.Sprintf("nodeSelector %s=%s: %s", key, selector[key], nodeLabel(node, key)))
		}
	}
	return strings.Join(mismatches, "; ")
}

// requiredAffinityMismatch explains why no term of a required node selector
// matched: for each term, the first requirement the node fails. Each
// requirement is matched alone by the same library that decided, so the
// explanation cannot disagree with the verdict.
func requiredAffinityMismatch(node *corev1.Node, selector *corev1.NodeSelector) string {
	var terms []string
	for i, term := range selector.NodeSelectorTerms {
		terms = append(terms, fmt.Sprintf("term %d: %s", i, termMismatch(node, term)))
	}
	if len(terms) == 0 {
		return "the required node affinity has no terms and matches no node"
	}
	return "no term of the required node affinity matched: " + strings.Join(terms, "; ")
}

func termMismatch(node *corev1.Node, term corev1.NodeSelectorTerm) string {
	for _, req := range term.MatchExpressions {
		if why, fails := requirementMismatch(node, req, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}); fails {
			return why
		}
	}
	for _, req := range term.MatchFields {
		if why, fails := requirementMismatch(node, req, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req}}); fails {
			return why
		}
	}
	return "empty, matches no node"
}

// requirementMismatch matches the term holding req alone and, if the node
// fails it, says what the node has instead (or why req is invalid).
func requirementMismatch(node *corev1.Node, req corev1.NodeSelectorRequirement, alone corev1.NodeSelectorTerm) (string, bool) {
	match, err := nodeaffinity.NewLazyErrorNodeSelector(&corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{alone},
	}).Match(node)
	if match {
		return "", false
	}
	what := fmt.Sprintf("%s %s %v", req.Key, req.Operator, req.Values)
	if req.Operator == corev1.NodeSelectorOpExists || req.Operator == corev1.NodeSelectorOpDoesNotExist {
		what = fmt.Sprintf("%s %s", req.Key, req.Operator)
	}
	if err != nil {
		return fmt.Sprintf("%s is invalid: %s", what, fieldErrorBody(err)), true
	}
	if len(alone.MatchFields) > 0 {
		return fmt.Sprintf("%s: the node is %s", what, node.Name), true
	}
	return fmt.Sprintf("%s: %s", what, nodeLabel(node, req.Key)), true
}

// nodeLabel says what the node has under key.
func nodeLabel(node *corev1.Node, key string) string {
	if value, has := node.Labels[key]; has {
		return fmt.Sprintf("node %s has %s=%s", node.Name, key, value)
	}
	return fmt.Sprintf("node %s has no label %s", node.Name, key)
}

// fieldErrorBody is the error without the field path: the path the library
// gives is the lone term's, not the pod's.
func fieldErrorBody(err error) string {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) && len(agg.Errors()) == 1 {
		err = agg.Errors()[0]
	}
	var fieldErr *field.Error
	if errors.As(err, &fieldErr) {
		return fieldErr.ErrorBody()
	}
	return err.Error()
}
