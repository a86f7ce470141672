package schemas

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API server's TestValidateConfigMapUpdate and TestValidateSecretUpdate
// rows on immutability, ported.
func TestImmutableConfigMapsAndSecretsRefuseUpdates(t *testing.T) {
	yes, no := true, false
	meta := metav1.ObjectMeta{Namespace: "default", Name: "app"}
	cm := func(immutable *bool, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: meta, Immutable: immutable, Data: data, BinaryData: binary}
	}
	secret := func(immutable *bool, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: meta, Immutable: immutable, Data: data}
	}
	d1, d2 := map[string]string{"k": "v1"}, map[string]string{"k": "v2"}
	b1, b2 := map[string][]byte{"k": []byte("v1")}, map[string][]byte{"k": []byte("v2")}
	for _, tc := range []struct {
		name     string
		err      error
		want     string // the error's text; "" for none
		refusing bool
	}{
		{"mutable, data changed", CheckConfigMapUpdate(cm(nil, d1, nil), cm(nil, d2, nil)), "", false},
		{"made immutable, data changed", CheckConfigMapUpdate(cm(&no, d1, nil), cm(&yes, d2, nil)), "", false},
		{"immutable, unchanged", CheckConfigMapUpdate(cm(&yes, d1, b1), cm(&yes, d1, b1)), "", false},
		{"immutable, nil and empty data alike", CheckConfigMapUpdate(cm(&yes, nil, nil), cm(&yes, map[string]string{}, nil)), "", false},
		{"immutable, data changed", CheckConfigMapUpdate(cm(&yes, d1, nil), cm(&yes, d2, nil)),
			"configmap default/app: data: field is immutable when `immutable` is set", true},
		{"immutable, binaryData changed", CheckConfigMapUpdate(cm(&yes, nil, b1), cm(&yes, nil, b2)),
			"configmap default/app: binaryData: field is immutable when `immutable` is set", true},
		{"immutable set back to false", CheckConfigMapUpdate(cm(&yes, d1, nil), cm(&no, d1, nil)),
			"configmap default/app: immutable: field is immutable when `immutable` is set", true},
		{"immutable unset, data changed", CheckConfigMapUpdate(cm(&yes, d1, nil), cm(nil, d2, nil)),
			"configmap default/app: immutable, data: field is immutable when `immutable` is set", true},
		{"secret mutable, data changed", CheckSecretUpdate(secret(&no, b1), secret(&no, b2)), "", false},
		{"secret immutable, unchanged", CheckSecretUpdate(secret(&yes, b1), secret(&yes, b1)), "", false},
		{"secret immutable, data changed", CheckSecretUpdate(secret(&yes, b1), secret(&yes, b2)),
			"secret default/app: data: field is immutable when `immutable` is set", true},
		{"secret immutable set back to false", CheckSecretUpdate(secret(&yes, b1), secret(&no, b1)),
			"secret default/app: immutable: field is immutable when `immutable` is set", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case !tc.refusing && tc.err != nil:
				t.Fatalf("refused: %v", tc.err)
			case tc.refusing && (!errors.Is(tc.err, ErrImmutable) || tc.err.Error() != tc.want):
				t.Fatalf("error %v, want %q (ErrImmutable)", tc.err, tc.want)
			}
		})
	}
}
