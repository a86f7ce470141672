// Package sealedtest gives tests a node's curve key pair, as
// `jetlet run` makes one, to seal Secrets for and open them with.
package sealedtest

import (
	"testing"

	"github.com/nats-io/nkeys"
)

// NodeKey returns a new curve key pair and its public key (the node
// record's xkey).
func NodeKey(t testing.TB) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateCurveKeys()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub
}
