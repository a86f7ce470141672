package natsjs

// A node's consumers. Their names are fixed, not generated, so that a
// node's NATS permissions can name them (docs/security.md). What a node
// reads back of its own results and events it reads with batched direct
// gets (ReadStored): no consumer.

// DurableName is a node's durable consumer on JETLET_INTENTS, through which
// it takes its intents.
func DurableName(node string) string { return "jetlet-" + node }

// ReplayName is the consumer through which a node reads its intents back at
// start-up.
func ReplayName(node string) string { return DurableName(node) + "-replay" }
