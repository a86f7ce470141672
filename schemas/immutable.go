package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrImmutable is an update the API server refuses for a ConfigMap or a
// Secret marked `immutable`: its data changed, or `immutable` was unset.
var ErrImmutable = errors.New("field is immutable when `immutable` is set")

// CheckConfigMapUpdate refuses replacing old with cm when old is immutable
// and cm changes its data or binaryData or is not immutable, as the API
// server's ValidateConfigMapUpdate does. The error names the fields only.
func CheckConfigMapUpdate(old, cm *corev1.ConfigMap) error {
	return immutableUpdate("configmap", old.Namespace, old.Name, old.Immutable, cm.Immutable, map[string]bool{
		"data":       !maps.Equal(old.Data, cm.Data),
		"binaryData": !maps.EqualFunc(old.BinaryData, cm.BinaryData, bytes.Equal),
	})
}

// CheckSecretUpdate is CheckConfigMapUpdate for Secrets (data; stringData is
// merged into data before one is stored). The error names the fields, never
// a value.
func CheckSecretUpdate(old, s *corev1.Secret) error {
	return immutableUpdate("secret", old.Namespace, old.Name, old.Immutable, s.Immutable, map[string]bool{
		"data": !maps.EqualFunc(old.Data, s.Data, bytes.Equal),
	})
}

func immutableUpdate(kind, namespace, name string, was, is *bool, changed map[string]bool) error {
	if was == nil || !*was {
		return nil
	}
	var fields []string
	if is == nil || !*is {
		fields = append(fields, "immutable")
	}
	for _, f := range []string{"data", "binaryData"} {
		if changed[f] {
			fields = append(fields, f)
		}
	}
	if fields == nil {
		return nil
	}
	return fmt.Errorf("%s %s/%s: %s: %w", kind, namespace, name, strings.Join(fields, ", "), ErrImmutable)
}
