package consumer

import "github.com/nats-io/nats.go/jetstream"

// ConsumerConfig is the durable consumer Run attaches, for tests that pull
// from it too.
func (c *Consumer) ConsumerConfig() jetstream.ConsumerConfig { return c.consumerConfig() }
