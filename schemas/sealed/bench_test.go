package sealed

import (
	"crypto/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas/sealed/sealedtest"
)

// secret4KiB is a Secret of 4 KiB of data: the cost the config issue asks
// for is sealing it (a scheduler, per node) and opening it (a node, per update).
func secret4KiB() *corev1.Secret {
	s := testSecret()
	s.Data = map[string][]byte{"blob": make([]byte, 4096)}
	_, _ = rand.Read(s.Data["blob"])
	return s
}

func BenchmarkSeal4KiB(b *testing.B) {
	s := secret4KiB()
	_, pub := sealedtest.NodeKey(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Seal(s, "n1", pub); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen4KiB(b *testing.B) {
	kp, pub := sealedtest.NodeKey(b)
	ss, err := Seal(secret4KiB(), "n1", pub)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(ss, "n1", kp); err != nil {
			b.Fatal(err)
		}
	}
}
