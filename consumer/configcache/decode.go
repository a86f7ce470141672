package configcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
)

// parseKey reads the object a key names: after prefix, <namespace>.<name>,
// the name taking every token after the namespace (it may hold dots).
func parseKey(kind kubecontainer.ObjectKind, prefix, key string) (kubecontainer.ObjectRef, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return kubecontainer.ObjectRef{}, false
	}
	namespace, name, ok := strings.Cut(rest, ".")
	if !ok || namespace == "" || name == "" {
		return kubecontainer.ObjectRef{}, false
	}
	return kubecontainer.ObjectRef{Kind: kind, Namespace: namespace, Name: name}, true
}

// decodeConfigMap reads a ConfigMap as `kubectl get configmap -o json`
// writes it. A ConfigMap that leaves out its namespace or name takes its
// key's; one that names another object is refused.
func decodeConfigMap(ref kubecontainer.ObjectRef, value []byte) (*corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	if err := json.Unmarshal(value, &cm); err != nil {
		return nil, fmt.Errorf("not a ConfigMap's JSON: %w", err)
	}
	if cm.Kind != "" && cm.Kind != string(kubecontainer.KindConfigMap) {
		return nil, fmt.Errorf("kind %q, want ConfigMap", cm.Kind)
	}
	if cm.Namespace == "" {
		cm.Namespace = ref.Namespace
	}
	if cm.Name == "" {
		cm.Name = ref.Name
	}
	if cm.Namespace != ref.Namespace || cm.Name != ref.Name {
		return nil, fmt.Errorf("it holds ConfigMap %s/%s, not the one its key names", cm.Namespace, cm.Name)
	}
	return &cm, nil
}

// openSecret opens a SealedSecret with the node's key. sealed.Open checks
// that it is this node's and holds the Secret its envelope names; the
// envelope must name the Secret its key does, or a value copied to another
// key would stand in for that Secret.
func (o *Objects) openSecret(ref kubecontainer.ObjectRef, value []byte) (*corev1.Secret, error) {
	var ss schemas.SealedSecret
	if json.Unmarshal(value, &ss) != nil {
		return nil, errors.New("not a SealedSecret's JSON")
	}
	if ss.Namespace != ref.Namespace || ss.Name != ref.Name {
		return nil, fmt.Errorf("%w: it is sealed as Secret %s/%s, not the one its key names", sealed.ErrDoesNotOpen, ss.Namespace, ss.Name)
	}
	return sealed.Open(&ss, o.node, o.key)
}
