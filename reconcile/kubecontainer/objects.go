package kubecontainer

import (
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ObjectSource gives the ConfigMaps and Secrets pods refer to, after
// kubelet's configmap and secret managers; consumer/configcache implements it
// over the buckets jetlet_configmaps and jetlet_secrets (docs/contract.md section 11).
//
// The objects returned are shared with the source's cache: callers must not
// modify them. The errors:
//   - ErrObjectNotFound (wrapped, "configmap default/app not found"): the
//     object is not there. A reference marked optional may be skipped.
//   - ErrObjectsNotSynced: the source has not yet read what the buckets held
//     when it started, so it cannot tell missing from not yet seen; retry.
//   - ErrObjectUnreadable (wrapped, naming the bucket key, never content):
//     the key holds a value that does not decode or open (a Secret sealed for
//     another node, tampered with); the pod waits as for a missing object,
//     but an optional reference is not skipped: the object exists.
//
// A Secret's values never appear in an error of an ObjectSource.
type ObjectSource interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// The errors of an ObjectSource, as its comment says.
var (
	ErrObjectNotFound   = errors.New("not found")
	ErrObjectsNotSynced = errors.New("objects not synced yet")
	ErrObjectUnreadable = errors.New("object unreadable")
)

// ObjectKind is the kind of an object pods refer to.
type ObjectKind string

const (
	KindConfigMap ObjectKind = "ConfigMap"
	KindSecret    ObjectKind = "Secret"
)

// ObjectRef names one ConfigMap or Secret, as the source's change
// notifications name what changed.
type ObjectRef struct {
	Kind      ObjectKind
	Namespace string
	Name      string
}

// String gives "configmap default/app", as kubectl names an object.
func (r ObjectRef) String() string {
	return strings.ToLower(string(r.Kind)) + " " + r.Namespace + "/" + r.Name
}
