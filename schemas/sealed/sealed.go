// Package sealed seals a core/v1 Secret for the one node that may read it and
// opens it there (docs/contract.md section 11): the Secret's JSON sealed with the
// curve keys of github.com/nats-io/nkeys (NaCl box) for the node's xkey, so
// the NATS servers, their store and every other node see only ciphertext.
//
// Errors name a Secret by its key in jetlet_secrets, never by its content.
package sealed

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetlet/jetlet/schemas"
)

// ErrWrongNode is wrapped by Open's error for a SealedSecret addressed to
// another node.
var ErrWrongNode = errors.New("sealed for another node")

// ErrDoesNotOpen is wrapped by Open's error for a SealedSecret this node's
// key cannot open, or that holds something else than its key names.
var ErrDoesNotOpen = errors.New("does not open with this node's key")

// SecretKey is the key of a Secret sealed for node in jetlet_secrets.
func SecretKey(node, namespace, name string) string {
	return node + "." + namespace + "." + name
}

// Seal seals secret for node, whose curve public key is nodeXKey, with a
// sender key made for this call alone (no sender seed to keep or leak).
func Seal(secret *corev1.Secret, node, nodeXKey string) (*schemas.SealedSecret, error) {
	if secret == nil {
		return nil, errors.New("seal: no Secret")
	}
	if err := checkKey(node, secret.Namespace, secret.Name); err != nil {
		return nil, fmt.Errorf("seal Secret: %w", err)
	}
	key := SecretKey(node, secret.Namespace, secret.Name)
	if !nkeys.IsValidPublicCurveKey(nodeXKey) {
		return nil, fmt.Errorf("seal Secret %s: node %s's xkey %q is not a curve public key (X...)", key, node, nodeXKey)
	}
	// As `kubectl get secret -o json` writes it, so the node reads a whole object.
	whole := *secret
	whole.TypeMeta.APIVersion, whole.TypeMeta.Kind = "v1", "Secret"
	plain, err := json.Marshal(&whole)
	if err != nil {
		return nil, fmt.Errorf("seal Secret %s: encode it", key) // json's error may quote a value
	}
	defer clear(plain)
	sender, err := nkeys.CreateCurveKeys()
	if err != nil {
		return nil, fmt.Errorf("seal Secret %s: sender key: %w", key, err)
	}
	defer sender.Wipe()
	senderPub, err := sender.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("seal Secret %s: sender key: %w", key, err)
	}
	box, err := sender.Seal(plain, nodeXKey)
	if err != nil {
		return nil, fmt.Errorf("seal Secret %s for node %s: %w", key, node, err)
	}
	return &schemas.SealedSecret{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindSealedSecret,
		Node:       node,
		Namespace:  secret.Namespace,
		Name:       secret.Name,
		Sender:     senderPub,
		Sealed:     base64.StdEncoding.EncodeToString(box),
	}, nil
}

// Open opens ss, read from jetlet_secrets by node, with the node's curve key
// pair. It refuses a SealedSecret addressed to another node (ErrWrongNode),
// one that does not open with key, and one whose Secret is not the one its
// envelope names, as a key swapped for another would be (ErrDoesNotOpen).
func Open(ss *schemas.SealedSecret, node string, key nkeys.KeyPair) (*corev1.Secret, error) {
	if ss == nil {
		return nil, errors.New("open: no SealedSecret")
	}
	name := SecretKey(ss.Node, ss.Namespace, ss.Name)
	switch {
	case ss.APIVersion != schemas.APIVersion || ss.Kind != schemas.KindSealedSecret:
		return nil, fmt.Errorf("open Secret %s: apiVersion %q kind %q, want %q %q", name, ss.APIVersion, ss.Kind, schemas.APIVersion, schemas.KindSealedSecret)
	case ss.Node != node:
		return nil, fmt.Errorf("open Secret %s on node %s: %w %s", name, node, ErrWrongNode, ss.Node)
	}
	if err := checkKey(ss.Node, ss.Namespace, ss.Name); err != nil {
		return nil, fmt.Errorf("open Secret %s: %w", name, err)
	}
	box, err := base64.StdEncoding.DecodeString(ss.Sealed)
	if err != nil {
		return nil, fmt.Errorf("open Secret %s: %w: sealed is not base64", name, ErrDoesNotOpen)
	}
	plain, err := key.Open(box, ss.Sender)
	if err != nil {
		// nkeys' errors say why (bad sender, tampered, another recipient)
		// and quote nothing of the input.
		return nil, fmt.Errorf("open Secret %s: %w (%w); seal it again for node %s's xkey", name, ErrDoesNotOpen, err, node)
	}
	defer clear(plain)
	var secret corev1.Secret
	if err := json.Unmarshal(plain, &secret); err != nil {
		// Not wrapped: json's syntax errors quote the bytes they stop at.
		return nil, fmt.Errorf("open Secret %s: %w: it holds no Secret JSON", name, ErrDoesNotOpen)
	}
	if secret.Namespace != ss.Namespace || secret.Name != ss.Name {
		return nil, fmt.Errorf("open Secret %s: %w: it holds Secret %s/%s, sealed for another key", name, ErrDoesNotOpen, secret.Namespace, secret.Name)
	}
	return &secret, nil
}

// checkKey refuses what cannot make a key of jetlet_secrets: a name with a
// wildcard or a space would match or split other keys.
func checkKey(node, namespace, name string) error {
	switch {
	case !schemas.ValidNodeName(node):
		return fmt.Errorf("node %q is not a node name (a DNS-1123 label)", node)
	case namespace == "":
		return errors.New("the Secret has no namespace")
	case name == "":
		return errors.New("the Secret has no name")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", namespace, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", name, errs[0])
	}
	return nil
}
