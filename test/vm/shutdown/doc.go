// Package shutdown holds the guest's test of graceful node shutdown
// (shutdown_test.go, build constraint jetlet_vm): jetlet and nats-server
// installed from deploy/systemd, pods with preStop hooks running,
// `systemctl poweroff`, and on the next boot the bus read back
// (docs/node.md, Graceful node shutdown; docs/testing.md).
package shutdown
