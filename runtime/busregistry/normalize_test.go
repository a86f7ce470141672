package busregistry_test

import (
	"testing"

	"github.com/jetlet/jetlet/runtime/busregistry"
)

func TestNormalizeRef(t *testing.T) {
	digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := map[string]string{
		"busybox":                           "docker.io/library/busybox:latest",
		"busybox:1.36":                      "docker.io/library/busybox:1.36",
		"docker.io/busybox":                 "docker.io/library/busybox:latest",
		"index.docker.io/library/busybox":   "docker.io/library/busybox:latest",
		"user/app":                          "docker.io/user/app:latest",
		"ghcr.io/o/app:v1":                  "ghcr.io/o/app:v1",
		"localhost:5000/app":                "localhost:5000/app:latest",
		"localhost/app":                     "localhost/app:latest",
		"registry.k8s.io/pause@" + digest:   "registry.k8s.io/pause@" + digest,
		"busybox:1.36@" + digest:            "docker.io/library/busybox@" + digest,
		"localhost:5000/o/app:v1@" + digest: "localhost:5000/o/app@" + digest,
	}
	for in, want := range tests {
		if got, err := busregistry.NormalizeRef(in); err != nil || got != want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Busybox", "busybox:", "a b", "busybox@sha256:12"} {
		if got, err := busregistry.NormalizeRef(bad); err == nil {
			t.Errorf("NormalizeRef(%q) = %q, want an error", bad, got)
		}
	}
}

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
		if err := busregistry.CheckLoopback(addr); (err == nil) != ok {
			t.Errorf("CheckLoopback(%q) = %v, want ok %v", addr, err, ok)
		}
	}
	if _, err := busregistry.Listen(busregistry.Config{Listen: "0.0.0.0:0"}); err == nil {
		t.Errorf("Listen on 0.0.0.0 succeeded")
	}
}
