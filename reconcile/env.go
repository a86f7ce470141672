package reconcile

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podIPs are the IPs the downward API reads; podIP is the first.
type podNetwork struct {
	podIP  string
	podIPs []string
}

// makeEnvironmentVariables builds the container's environment as kubelet does:
// in order, each value expanded with the variables defined before it, and
// fieldRefs and resourceFieldRefs resolved from the pod (the downward API).
// Sources jetlet cannot honour (ConfigMaps, Secrets) are an error.
func (m *Kuberuntime) makeEnvironmentVariables(pod *corev1.Pod, c *corev1.Container, net podNetwork) ([]*runtimeapi.KeyValue, error) {
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %q: envFrom is not supported", c.Name)
	}
	values := make(map[string]string, len(c.Env))
	order := make([]string, 0, len(c.Env))
	mapping := func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, mapping)
		case e.ValueFrom.FieldRef != nil:
			var err error
			v, err = m.podFieldValue(pod, e.ValueFrom.FieldRef.FieldPath, net)
			if err != nil {
				return nil, fmt.Errorf("container %q env %q: %w", c.Name, e.Name, err)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			var err error
			v, err = m.resourceFieldValue(pod, c, e.ValueFrom.ResourceFieldRef)
			if err != nil {
				return nil, fmt.Errorf("container %q env %q: %w", c.Name, e.Name, err)
			}
		default:
			return nil, fmt.Errorf("container %q env %q: only fieldRef and resourceFieldRef value sources are supported", c.Name, e.Name)
		}
		if _, seen := values[e.Name]; !seen {
			order = append(order, e.Name)
		}
		values[e.Name] = v
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(values[k])})
	}
	return out, nil
}

// podFieldValue resolves a downward API field path.
func (m *Kuberuntime) podFieldValue(pod *corev1.Pod, path string, net podNetwork) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return m.cfg.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return net.podIP, nil
	case "status.podIPs":
		return strings.Join(net.podIPs, ","), nil
	case "status.hostIP", "status.hostIPs":
		return m.cfg.NodeIP, nil
	}
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// envMapping looks variables up in the container's final environment, for
// the $(VAR) of command, args and subPathExpr.
func envMapping(envs []*runtimeapi.KeyValue) func(string) (string, bool) {
	values := make(map[string]string, len(envs))
	for _, e := range envs {
		values[e.Key] = string(e.Value)
	}
	return func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}
}

// expandCommandAndArgs expands $(VAR) in command and args.
func expandCommandAndArgs(c *corev1.Container, mapping func(string) (string, bool)) ([]string, []string) {
	var cmd, args []string
	for _, s := range c.Command {
		cmd = append(cmd, expand(s, mapping))
	}
	for _, s := range c.Args {
		args = append(args, expand(s, mapping))
	}
	return cmd, args
}
