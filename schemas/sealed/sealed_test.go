package sealed

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed/sealedtest"
)

// marker is the Secret's value: no error, failure message or stored byte
// may hold it.
const marker = "s3cr3t-marker-value-7f1e"

func testSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db.creds"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(marker)},
	}
}

// noMarker fails the test, without printing it, when err's text holds the
// Secret's value.
func noMarker(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), marker) {
		t.Error("an error holds the Secret's value")
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	kp, pub := sealedtest.NodeKey(t)
	ss, err := Seal(testSecret(), "n1", pub)
	if err != nil {
		t.Fatal(err)
	}
	if ss.APIVersion != schemas.APIVersion || ss.Kind != schemas.KindSealedSecret ||
		ss.Node != "n1" || ss.Namespace != "default" || ss.Name != "db.creds" || !nkeys.IsValidPublicCurveKey(ss.Sender) {
		t.Errorf("envelope %+v", *ss)
	}
	stored, err := json.Marshal(ss)
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{marker, base64.StdEncoding.EncodeToString([]byte(marker))} {
		if strings.Contains(string(stored), plain) {
			t.Error("the stored SealedSecret holds the Secret's value in the clear")
		}
	}
	got, err := Open(ss, "n1", kp)
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "default" || got.Name != "db.creds" || got.Type != corev1.SecretTypeOpaque ||
		string(got.Data["password"]) != marker || got.Kind != "Secret" || got.APIVersion != "v1" {
		t.Error("the opened Secret is not the one sealed")
	}
}

func TestSealUsesAFreshSenderEachTime(t *testing.T) {
	_, pub := sealedtest.NodeKey(t)
	a, err := Seal(testSecret(), "n1", pub)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Seal(testSecret(), "n1", pub)
	if err != nil {
		t.Fatal(err)
	}
	if a.Sender == b.Sender || a.Sealed == b.Sealed {
		t.Error("two seals share a sender key or ciphertext")
	}
}

func TestSealRefuses(t *testing.T) {
	_, pub := sealedtest.NodeKey(t)
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userPub, _ := user.PublicKey()
	tests := []struct {
		name   string
		secret func(*corev1.Secret)
		node   string
		xkey   string
		want   string
	}{
		{"no namespace", func(s *corev1.Secret) { s.Namespace = "" }, "n1", pub, "no namespace"},
		{"no name", func(s *corev1.Secret) { s.Name = "" }, "n1", pub, "no name"},
		{"wildcard in name", func(s *corev1.Secret) { s.Name = "a*" }, "n1", pub, `name "a*"`},
		{"dot in namespace", func(s *corev1.Secret) { s.Namespace = "a.b" }, "n1", pub, `namespace "a.b"`},
		{"bad node", func(*corev1.Secret) {}, "N1.x", pub, "not a node name"},
		{"garbage xkey", func(*corev1.Secret) {}, "n1", "nope", "is not a curve public key"},
		{"user key as xkey", func(*corev1.Secret) {}, "n1", userPub, "is not a curve public key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSecret()
			tt.secret(s)
			_, err := Seal(s, tt.node, tt.xkey)
			noMarker(t, err)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	kp, pub := sealedtest.NodeKey(t)
	_, otherPub := sealedtest.NodeKey(t)
	seal := func(s *corev1.Secret, node, xkey string) *schemas.SealedSecret {
		ss, err := Seal(s, node, xkey)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	other := testSecret()
	other.Name = "other"
	tests := []struct {
		name    string
		ss      *schemas.SealedSecret
		wantErr error
		want    string
	}{
		{"for another node", seal(testSecret(), "n2", pub), ErrWrongNode, "n2.default.db.creds on node n1"},
		{"for another key", seal(testSecret(), "n1", otherPub), ErrDoesNotOpen, "n1.default.db.creds"},
		{"swapped key", func() *schemas.SealedSecret {
			ss := seal(other, "n1", pub)
			ss.Name = "db.creds"
			return ss
		}(), ErrDoesNotOpen, "holds Secret default/other"},
		{"tampered", func() *schemas.SealedSecret {
			ss := seal(testSecret(), "n1", pub)
			box, _ := base64.StdEncoding.DecodeString(ss.Sealed)
			box[len(box)-1] ^= 1
			ss.Sealed = base64.StdEncoding.EncodeToString(box)
			return ss
		}(), ErrDoesNotOpen, "n1.default.db.creds"},
		{"another sender", func() *schemas.SealedSecret {
			ss := seal(testSecret(), "n1", pub)
			ss.Sender = otherPub
			return ss
		}(), ErrDoesNotOpen, "n1.default.db.creds"},
		{"not base64", func() *schemas.SealedSecret {
			ss := seal(testSecret(), "n1", pub)
			ss.Sealed = "!!"
			return ss
		}(), ErrDoesNotOpen, "not base64"},
		{"another kind", func() *schemas.SealedSecret {
			ss := seal(testSecret(), "n1", pub)
			ss.Kind = "Secret"
			return ss
		}(), nil, `kind "Secret"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Open(tt.ss, "n1", kp)
			noMarker(t, err)
			if got != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestOpenRefusesWhatHoldsNoSecret(t *testing.T) {
	kp, pub := sealedtest.NodeKey(t)
	sender, senderPub := sealedtest.NodeKey(t)
	box, err := sender.Seal([]byte("{"+marker), pub)
	if err != nil {
		t.Fatal(err)
	}
	ss := &schemas.SealedSecret{
		APIVersion: schemas.APIVersion, Kind: schemas.KindSealedSecret,
		Node: "n1", Namespace: "default", Name: "db", Sender: senderPub,
		Sealed: base64.StdEncoding.EncodeToString(box),
	}
	_, err = Open(ss, "n1", kp)
	noMarker(t, err)
	if !errors.Is(err, ErrDoesNotOpen) {
		t.Errorf("error %v, want %v", err, ErrDoesNotOpen)
	}
}
