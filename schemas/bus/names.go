package bus

import "strconv"

// The consumers through which a node reads back what it stored: its own
// results (whether an intent is answered) and its own events (the event
// ledger). Their names are fixed, not generated, so that a node's NATS
// permissions can name them (docs/security.md); each must be created with a
// filter within the node's own subjects and with no acks, and deleted after.
// A node runs one results read-back at a time, and up to EventsReadBackSlots
// events read-backs.

// DurableName is a node's durable consumer on JETLET_INTENTS, through which
// it takes its intents.
func DurableName(node string) string { return "jetlet-" + node }

// ReplayName is the consumer through which a node reads its intents back at
// start-up.
func ReplayName(node string) string { return DurableName(node) + "-replay" }

// ResultsReadBackName is node's read-back consumer on JETLET_RESULTS.
func ResultsReadBackName(node string) string { return "jetlet-" + node + "-results" }

// EventsReadBackSlots is how many read-back consumers a node has on
// JETLET_EVENTS: its pods are read back that many at a time.
const EventsReadBackSlots = 8

// EventsReadBackName is node's read-back consumer number slot (0 to
// EventsReadBackSlots-1) on JETLET_EVENTS.
func EventsReadBackName(node string, slot int) string {
	return "jetlet-" + node + "-events-" + strconv.Itoa(slot)
}
