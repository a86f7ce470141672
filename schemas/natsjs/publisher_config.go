package natsjs

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// ErrInvalidConfig wraps every configuration error of the publishers of a
// node's results, events and statuses.
var ErrInvalidConfig = errors.New("invalid publisher config")

// PublisherConfig is the Config of a publisher of a node's messages.
type PublisherConfig interface {
	// SetDefaults fills what is unset.
	SetDefaults()
	// Validate reports the first setting that cannot work, wrapping
	// ErrInvalidConfig.
	Validate() error
}

// Prepare fills in cfg's defaults and checks it, and that there is a
// JetStream to publish to: each publisher's New starts with it, before any
// I/O.
func Prepare(js jetstream.JetStream, cfg PublisherConfig) error {
	if js == nil {
		return fmt.Errorf("%w: no JetStream", ErrInvalidConfig)
	}
	cfg.SetDefaults()
	return cfg.Validate()
}

// CheckNode reports a node name that is not a DNS-1123 label, which no
// subject or key of the node's could hold.
func CheckNode(node string) error {
	if !schemas.ValidNodeName(node) {
		return fmt.Errorf("%w: node %q is not a DNS-1123 label", ErrInvalidConfig, node)
	}
	return nil
}

// CheckSubjectPrefix reports a subject prefix that is not one subject token.
func CheckSubjectPrefix(prefix string) error {
	if !schemas.ValidSubjectPrefix(prefix) {
		return fmt.Errorf("%w: subject prefix %q is not one subject token", ErrInvalidConfig, prefix)
	}
	return nil
}
