package client

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
	"github.com/jetlet/jetlet/schemas/sealed/sealedtest"
)

// SealSecret seals for the key given, which only the node's seed opens,
// under the node's key of jetlet_secrets; a bad key is refused without the
// value in the error.
func TestSealSecret(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns"}, Data: map[string][]byte{"token": []byte("marker-s3cret")}}
	kp, xkey := sealedtest.NodeKey(t)
	w, err := SealSecret(s, "n1", xkey)
	if err != nil {
		t.Fatal(err)
	}
	if w.bucket != schemas.BucketSecrets || w.key != "n1.ns.creds" || w.Node != "n1" || w.Result != ConfigConfigured || strings.Contains(string(w.value), "marker-s3cret") {
		t.Fatalf("write %+v %s", w, w.value)
	}
	var ss schemas.SealedSecret
	if err := json.Unmarshal(w.value, &ss); err != nil {
		t.Fatal(err)
	}
	opened, err := sealed.Open(&ss, "n1", kp)
	if err != nil || string(opened.Data["token"]) != "marker-s3cret" {
		t.Errorf("opened %v, %v", opened, err)
	}
	if _, err := SealSecret(s, "n1", ""); err == nil || strings.Contains(err.Error(), "marker-s3cret") {
		t.Errorf("sealed for no key: %v", err)
	}
}
