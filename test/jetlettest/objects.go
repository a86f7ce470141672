package jetlettest

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
)

// PutConfigMap stores a ConfigMap of the default namespace as a scheduler
// does (docs/contract.md section 11).
func PutConfigMap(t testing.TB, js jetstream.JetStream, name string, data map[string]string) {
	t.Helper()
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
	putKV(t, js, schemas.BucketConfigMaps, "default."+name, cm)
}

// PutSecret seals a Secret of the default namespace for node, whose xkey
// its record gives, and stores it as a scheduler does.
func PutSecret(t testing.TB, js jetstream.JetStream, node, xkey, name string, typ corev1.SecretType, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: typ, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	ss, err := sealed.Seal(s, node, xkey)
	if err != nil {
		t.Fatal(err)
	}
	putKV(t, js, schemas.BucketSecrets, sealed.SecretKey(node, "default", name), ss)
}

func putKV(t testing.TB, js jetstream.JetStream, bucket, key string, v any) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), key, data); err != nil {
		t.Fatal(err)
	}
}
