package events

// The consumers through which a node reads back what it stored: its own
// results (whether an intent is answered) and its own events (the event
// ledger). Their names are fixed, not generated, so that a node's NATS
// permissions can name them (docs/security.md); each must be created with a
// filter within the node's own subjects and with no acks, and deleted after.
// A node runs one read-back per stream at a time.

// ResultsReadBackName is node's read-back consumer on JETLET_RESULTS.
func ResultsReadBackName(node string) string { return "jetlet-" + node + "-results" }

// EventsReadBackName is node's read-back consumer on JETLET_EVENTS.
func EventsReadBackName(node string) string { return "jetlet-" + node + "-events" }
