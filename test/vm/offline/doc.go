// Package offline holds a guest test (test/vm, build tag jetlet_vm): jetlet
// and nats-server installed as systemd units, the guest rebooted with
// nats-server disabled, and every pod running again from the node's
// checkpoint before the bus is back (docs/operations.md, "When a node's bus
// is gone").
package offline
