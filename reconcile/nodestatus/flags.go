package nodestatus

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// reservable are the resources --kube-reserved and --system-reserved may set
// aside. kubelet also takes pid, which it enforces on its pods' cgroup;
// jetlet enforces allocatable at admission only, so it refuses pid rather
// than take a reservation it would not act on.
var reservable = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// ParseReserved parses a --kube-reserved or --system-reserved value:
// comma-separated name=quantity pairs of cpu, memory and ephemeral-storage,
// as kubelet writes them (cpu=100m,memory=256Mi). Empty reserves nothing.
func ParseReserved(s string) (corev1.ResourceList, error) {
	reserved := corev1.ResourceList{}
	for _, pair := range splitList(s) {
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=quantity", pair)
		}
		rn := corev1.ResourceName(strings.TrimSpace(name))
		if !slices.Contains(reservable, rn) {
			return nil, fmt.Errorf("%q: cannot reserve %s (only cpu, memory and ephemeral-storage)", pair, rn)
		}
		if _, dup := reserved[rn]; dup {
			return nil, fmt.Errorf("%s reserved twice", rn)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", pair, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%q: a reservation cannot be negative", pair)
		}
		reserved[rn] = q
	}
	return reserved, nil
}

// Labels kubelet sets on its node itself.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelOS       = "kubernetes.io/os"
	LabelArch     = "kubernetes.io/arch"
)

// Labels is the node's labels: kubernetes.io/hostname (the node's name),
// kubernetes.io/os and kubernetes.io/arch, then extra (--node-labels),
// which may not change those three.
func Labels(node string, extra map[string]string) map[string]string {
	labels := map[string]string{LabelHostname: node, LabelOS: goruntime.GOOS, LabelArch: goruntime.GOARCH}
	for k, v := range extra {
		if _, own := labels[k]; !own {
			labels[k] = v
		}
	}
	return labels
}

// ParseLabels parses --node-labels: comma-separated key=value pairs, each a
// valid label. As kubelet, it refuses a key in the kubernetes.io and k8s.io
// namespaces unless it is one kubelet may set (kubernetes.io/hostname,
// topology.kubernetes.io/zone, node.kubernetes.io/..., kubelet.kubernetes.io/...):
// the others belong to the control plane.
func ParseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for _, pair := range splitList(s) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value", pair)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("label %q value %q: %s", k, v, strings.Join(errs, "; "))
		}
		if !kubeletMaySet(k) {
			return nil, fmt.Errorf("label %q: kubelet may not set labels of the kubernetes.io or k8s.io namespaces but %s and those under node.kubernetes.io/ and kubelet.kubernetes.io/",
				k, strings.Join(kubeletLabels, ", "))
		}
		labels[k] = v
	}
	return labels, nil
}

// kubeletLabels are the labels of the kubernetes.io namespaces kubelet may
// set on its node (the NodeRestriction admission plugin's list).
var kubeletLabels = []string{
	LabelHostname, LabelOS, LabelArch, "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	"topology.kubernetes.io/zone", "topology.kubernetes.io/region",
	"failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
	"node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
}

func kubeletMaySet(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok || (!inNamespace(prefix, "kubernetes.io") && !inNamespace(prefix, "k8s.io")) {
		return true
	}
	return slices.Contains(kubeletLabels, key) ||
		inNamespace(prefix, "kubelet.kubernetes.io") || inNamespace(prefix, "node.kubernetes.io")
}

// inNamespace: a label prefix is the namespace ns or under it.
func inNamespace(prefix, ns string) bool { return prefix == ns || strings.HasSuffix(prefix, "."+ns) }

// ParseTaints parses --register-with-taints: comma-separated
// key[=value]:effect, effect one of NoSchedule, PreferNoSchedule and
// NoExecute, as kubelet.
func ParseTaints(s string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	seen := map[string]bool{}
	for _, spec := range splitList(s) {
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("taint %q: want key[=value]:effect", spec)
		}
		t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
		t.Key, t.Value, _ = strings.Cut(kv, "=")
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
		}
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return nil, fmt.Errorf("taint %q: key: %s", spec, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return nil, fmt.Errorf("taint %q: value: %s", spec, strings.Join(errs, "; "))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			return nil, fmt.Errorf("taint %q: the key %s has the effect %s twice", spec, t.Key, t.Effect)
		}
		seen[id] = true
		taints = append(taints, t)
	}
	return taints, nil
}

// splitList splits a comma-separated flag value, ignoring empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
