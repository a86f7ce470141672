package registry_test

import (
	"testing"

	"github.com/jetlet/jetlet/schemas/natsjs/registry"
)

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:5050": true,
		"127.0.0.9:0":    true,
		"[::1]:5050":     true,
		"localhost:5050": true,
		"0.0.0.0:5050":   false,
		":5050":          false,
		"[::]:5050":      false,
		"10.0.0.1:5050":  false,
		"example.com:80": false,
		"127.0.0.1":      false,
	} {
		if err := registry.CheckLoopback(addr); (err == nil) != ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok %v", addr, err, ok)
		}
	}
	if _, err := registry.Listen(registry.Config{Listen: "0.0.0.0:0"}); err == nil {
		t.Errorf("Listen on 0.0.0.0 succeeded")
	}
}
