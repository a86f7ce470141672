package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// podIPs are the IPs the downward API reads; podIP is the first.
type podNetwork struct {
	podIP  string
	podIPs []string
}

// makeEnvironmentVariables builds the container's environment as kubelet does:
// envFrom's ConfigMaps and Secrets first (keys sorted, each with the source's
// prefix; a key that is no variable name skipped with an
// InvalidEnvironmentVariableNames event), then env in order, each value
// expanded with the variables defined before it, fieldRefs and
// resourceFieldRefs resolved from the pod (the downward API), configMapKeyRef
// and secretKeyRef read through Config.Objects. A missing object or key that
// is not optional is an error naming it (never a value): the container waits
// in CreateContainerConfigError. The values are those at the container's
// creation; a later change of an object reaches the next instance only.
func (m *Kuberuntime) makeEnvironmentVariables(ctx context.Context, pod *corev1.Pod, c *corev1.Container, net podNetwork) ([]*runtimeapi.KeyValue, error) {
	objs := m.podObjects(pod)
	values := make(map[string]string, len(c.Env))
	order := make([]string, 0, len(c.Env))
	set := func(name, v string) {
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = v
	}
	mapping := func(name string) (string, bool) {
		v, ok := values[name]
		return v, ok
	}
	for _, f := range c.EnvFrom {
		src, data, err := envFromData(objs, f)
		if err != nil {
			return nil, err
		}
		var invalid []string
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := f.Prefix + k
			if len(validation.IsRelaxedEnvVarName(name)) > 0 {
				invalid = append(invalid, name)
				continue
			}
			set(name, data[k])
		}
		if len(invalid) > 0 {
			m.invalidEnvNames(ctx, pod, c, src, invalid)
		}
	}
	for _, e := range c.Env {
		v, ok, err := m.envValue(objs, pod, c, &e, net, mapping)
		if err != nil {
			return nil, err
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(values[k])})
	}
	return out, nil
}

// envValue is one env entry's value; ok is false for an optional reference
// to what does not exist, which sets nothing.
func (m *Kuberuntime) envValue(objs *podObjects, pod *corev1.Pod, c *corev1.Container, e *corev1.EnvVar, net podNetwork, mapping func(string) (string, bool)) (string, bool, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return expand(e.Value, mapping), true, nil
	case from.FieldRef != nil:
		v, err := m.podFieldValue(pod, from.FieldRef.FieldPath, net)
		if err != nil {
			return "", false, fmt.Errorf("container %q env %q: %w", c.Name, e.Name, err)
		}
		return v, true, nil
	case from.ResourceFieldRef != nil:
		v, err := m.resourceFieldValue(pod, c, from.ResourceFieldRef)
		if err != nil {
			return "", false, fmt.Errorf("container %q env %q: %w", c.Name, e.Name, err)
		}
		return v, true, nil
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		optional := isTrue(ref.Optional)
		cm, err := objs.configMap(ref.Name, optional)
		if err != nil || cm == nil {
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional {
			return "", false, missingKey(kubecontainer.KindConfigMap, pod.Namespace, ref.Name, ref.Key)
		}
		return v, ok, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		optional := isTrue(ref.Optional)
		sec, err := objs.secret(ref.Name, optional)
		if err != nil || sec == nil {
			return "", false, err
		}
		v, ok := sec.Data[ref.Key]
		if !ok && !optional {
			return "", false, missingKey(kubecontainer.KindSecret, pod.Namespace, ref.Name, ref.Key)
		}
		return string(v), ok, nil
	}
	return "", false, fmt.Errorf("container %q env %q: the value source is not supported", c.Name, e.Name)
}

// envFromData is what one envFrom source holds (a ConfigMap's data, a
// Secret's), and the source; nil data for an optional source that does not
// exist.
func envFromData(objs *podObjects, f corev1.EnvFromSource) (kubecontainer.ObjectRef, map[string]string, error) {
	ref := kubecontainer.ObjectRef{Namespace: objs.namespace}
	switch {
	case f.ConfigMapRef != nil:
		ref.Kind, ref.Name = kubecontainer.KindConfigMap, f.ConfigMapRef.Name
		cm, err := objs.configMap(ref.Name, isTrue(f.ConfigMapRef.Optional))
		if err != nil || cm == nil {
			return ref, nil, err
		}
		return ref, cm.Data, nil
	case f.SecretRef != nil:
		ref.Kind, ref.Name = kubecontainer.KindSecret, f.SecretRef.Name
		sec, err := objs.secret(ref.Name, isTrue(f.SecretRef.Optional))
		if err != nil || sec == nil {
			return ref, nil, err
		}
		data := make(map[string]string, len(sec.Data))
		for k, v := range sec.Data {
			data[k] = string(v)
		}
		return ref, data, nil
	}
	return ref, nil, errors.New("envFrom: neither configMapRef nor secretRef")
}

// invalidEnvNames emits kubelet's InvalidEnvironmentVariableNames for the
// keys of src skipped; the same skip of the same container is one event.
func (m *Kuberuntime) invalidEnvNames(ctx context.Context, pod *corev1.Pod, c *corev1.Container, src kubecontainer.ObjectRef, keys []string) {
	ref := podRefOf(pod)
	id := hashID(append([]string{ref.UID, c.Name, src.String()}, keys...)...) + "." + string(schemas.EventInvalidEnvironmentVariableNames)
	ev := kubecontainer.NewEvent(m.cfg.NodeName, ref, schemas.EventInvalidEnvironmentVariableNames, id, m.cfg.Clock.Now())
	ev.Container, ev.Reason = c.Name, string(schemas.EventInvalidEnvironmentVariableNames)
	ev.Message = fmt.Sprintf("Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
		strings.Join(keys, ", "), strings.ToLower(string(src.Kind)), src.Namespace, src.Name)
	m.emit.Emit(ctx, ev)
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
