package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// errNoObjectSource: the node was configured without Config.Objects, so no
// pod that refers to a ConfigMap or Secret gets past the decoder; one that
// does anyway waits, saying why.
var errNoObjectSource = errors.New("this node reads no ConfigMaps or Secrets (no object source)")

// podObjects reads the ConfigMaps and Secrets of one pod's namespace for one
// container or volume set up, each at most once (kubelet's makeEnvironment-
// Variables keeps the same per-call maps), so that every reference to one
// object sees the same version of it.
type podObjects struct {
	src        kubecontainer.ObjectSource
	namespace  string
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

func (m *Kuberuntime) podObjects(pod *corev1.Pod) *podObjects {
	return &podObjects{src: m.cfg.Objects, namespace: pod.Namespace,
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
}

// configMap is the ConfigMap name; nil without an error when it does not
// exist and optional says that is fine. The errors name the object, as the
// source's do.
func (o *podObjects) configMap(name string, optional bool) (*corev1.ConfigMap, error) {
	return getObject(o.configMaps, o.src, kubecontainer.ObjectSource.ConfigMap, o.namespace, name, optional)
}

// secret is configMap's twin for Secrets.
func (o *podObjects) secret(name string, optional bool) (*corev1.Secret, error) {
	return getObject(o.secrets, o.src, kubecontainer.ObjectSource.Secret, o.namespace, name, optional)
}

func getObject[T any](cache map[string]*T, src kubecontainer.ObjectSource, get func(kubecontainer.ObjectSource, string, string) (*T, error), ns, name string, optional bool) (*T, error) {
	if obj, ok := cache[name]; ok {
		return obj, nil
	}
	if src == nil {
		return nil, errNoObjectSource
	}
	obj, err := get(src, ns, name)
	switch {
	case errors.Is(err, kubecontainer.ErrObjectNotFound) && optional:
		obj = nil
	case err != nil:
		return nil, err
	}
	cache[name] = obj
	return obj, nil
}

// missingKey is kubelet's error for a key a reference names and the object
// lacks.
func missingKey(kind kubecontainer.ObjectKind, ns, name, key string) error {
	return fmt.Errorf("couldn't find key %s in %s %s/%s", key, kind, ns, name)
}

// ReferencedObjects lists the ConfigMaps and Secrets the pod refers to (its
// volumes, projected sources, env, envFrom and imagePullSecrets), each once,
// sorted: what a change should wake the pod's worker for.
func ReferencedObjects(pod *corev1.Pod) []kubecontainer.ObjectRef {
	seen := map[kubecontainer.ObjectRef]bool{}
	add := func(kind kubecontainer.ObjectKind, name string) {
		if name != "" {
			seen[kubecontainer.ObjectRef{Kind: kind, Namespace: pod.Namespace, Name: name}] = true
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add(kubecontainer.KindConfigMap, v.ConfigMap.Name)
		case v.Secret != nil:
			add(kubecontainer.KindSecret, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(kubecontainer.KindConfigMap, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add(kubecontainer.KindSecret, s.Secret.Name)
				}
			}
		}
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, f := range c.EnvFrom {
				if f.ConfigMapRef != nil {
					add(kubecontainer.KindConfigMap, f.ConfigMapRef.Name)
				}
				if f.SecretRef != nil {
					add(kubecontainer.KindSecret, f.SecretRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					add(kubecontainer.KindConfigMap, r.Name)
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					add(kubecontainer.KindSecret, r.Name)
				}
			}
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(kubecontainer.KindSecret, s.Name)
	}
	out := make([]kubecontainer.ObjectRef, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b kubecontainer.ObjectRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}
