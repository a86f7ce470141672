package natsjs_test

import (
	"cmp"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/natsjs"
)

// publisherConfig is a publisher's Config as the publishers write theirs:
// a node and a subject prefix, defaulted.
type publisherConfig struct {
	Node, SubjectPrefix string
}

func (c *publisherConfig) SetDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = "jetlet"
	}
}

func (c *publisherConfig) Validate() error {
	return cmp.Or(natsjs.CheckNode(c.Node), natsjs.CheckSubjectPrefix(c.SubjectPrefix))
}

func TestPrepareRefusesWhatCannotWork(t *testing.T) {
	// Prepare publishes nothing: any JetStream that is not nil will do.
	js := struct{ jetstream.JetStream }{}
	for _, tc := range []struct {
		name string
		js   jetstream.JetStream
		cfg  publisherConfig
	}{
		{"no JetStream", nil, publisherConfig{Node: "n1"}},
		{"no node", js, publisherConfig{}},
		{"node with a dot", js, publisherConfig{Node: "n1.x"}},
		{"node in capitals", js, publisherConfig{Node: "N1"}},
		{"node too long", js, publisherConfig{Node: strings.Repeat("n", 64)}},
		{"prefix of two tokens", js, publisherConfig{Node: "n1", SubjectPrefix: "a.b"}},
		{"wildcard prefix", js, publisherConfig{Node: "n1", SubjectPrefix: ">"}},
		{"prefix with a space", js, publisherConfig{Node: "n1", SubjectPrefix: "jet let"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := natsjs.Prepare(tc.js, &tc.cfg); !errors.Is(err, natsjs.ErrInvalidConfig) {
				t.Errorf("Prepare: %v, want ErrInvalidConfig", err)
			}
		})
	}
	cfg := publisherConfig{Node: "n1"}
	if err := natsjs.Prepare(js, &cfg); err != nil || cfg.SubjectPrefix != "jetlet" {
		t.Errorf("Prepare of a node's config: %v, prefix %q; want no error, the default prefix", err, cfg.SubjectPrefix)
	}
}
