// Package restart holds the guest's test of jetlet restarted under systemd
// while the embedded runtime's pods run (restart_test.go, build constraint
// jetlet_vm): `systemctl restart jetlet` and a SIGKILL that systemd's
// Restart=on-failure answers, each followed by the pod adopted without its
// container restarted (docs/running.md, hosts; docs/testing.md).
package restart
