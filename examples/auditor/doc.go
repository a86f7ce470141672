// Command auditor follows the lifecycle events of every node of a jetlet
// fleet into a ledger, a file of JSON lines, each an event as a CloudEvent
// (structured mode) with its sequence in JETLET_EVENTS as the extension
// attribute jetletseq. It uses the client package alone (docs/client.md):
// client.Events with Follow, after the stored position.
//
// The ledger is its own position: at start the auditor reads the sequence of
// its last whole line and follows from there (EventsOptions.After), so that
// an event is in the ledger exactly when it was handled, however the auditor
// was stopped; a last line cut short by a crash is cut off and its event read
// again. No second file says where it is, so there is no moment between
// writing a line and storing a position for a crash to fall into. Lines are
// written whole, one write each, and synced to disk in groups: what has come
// while the last sync ran is written and synced once.
//
// Against a `jetlet run` with its embedded NATS, from the directory it ran
// in (the auditor presents the seed of ./jetlet-data):
//
//	go run ./examples/auditor --ledger audit.jsonl
//
// Against nodes on a NATS of their own, stopped with ^C or killed and
// started again at will:
//
//	go build -o auditor ./examples/auditor
//	./auditor --nats-url nats://nats:4222 --ledger /var/lib/audit/ledger.jsonl
//
// Its test runs it as a real process on two real `jetlet run` nodes, SIGKILLs
// it twice while pods start, and compares the ledger with the stream:
//
//	go test -race -run TestAuditor -v ./examples/auditor
package main
