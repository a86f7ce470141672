package imageref

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		in   string
		want string // "" when the reference is invalid
	}{
		{"busybox", "docker.io/library/busybox:latest"},
		{"busybox:1.36", "docker.io/library/busybox:1.36"},
		{"library/busybox", "docker.io/library/busybox:latest"},
		{"docker.io/busybox", "docker.io/library/busybox:latest"},
		{"docker.io/library/busybox:latest", "docker.io/library/busybox:latest"},
		{"index.docker.io/foo/bar:v1", "docker.io/foo/bar:v1"},
		{"foo/bar", "docker.io/foo/bar:latest"},
		{"localhost/a", "localhost/a:latest"},
		{"localhost:5000/a", "localhost:5000/a:latest"},
		{"localhost:5000/a/b:c", "localhost:5000/a/b:c"},
		{"127.0.0.1:5000/x", "127.0.0.1:5000/x:latest"},
		{"[::1]:5000/a:b", "[::1]:5000/a:b"},
		{"registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"},
		{"Example.com/a", "Example.com/a:latest"},
		{"a.b/c__d/e-f--g.h:T_a.g-1", "a.b/c__d/e-f--g.h:T_a.g-1"},
		{"foo@sha256:" + hex, "docker.io/library/foo@sha256:" + hex},
		{"foo:tag@sha256:" + hex, "docker.io/library/foo@sha256:" + hex},
		{"quay.io/a/b:1@sha256:" + hex, "quay.io/a/b@sha256:" + hex},
		// Where the normalisers this package replaced disagreed (the
		// embedded runtime's host programs, the credentials keyring, the
		// bus registry): containerd's answer.
		{"index.docker.io/library/busybox:1.36", "docker.io/library/busybox:1.36"},
		{"index.docker.io/busybox", "docker.io/library/busybox:latest"},
		{"registry-1.docker.io/someone/app", "registry-1.docker.io/someone/app:latest"},
		{"Foo/bar", "Foo/bar:latest"},
		{"docker.io/busybox:1.36@sha256:" + hex, "docker.io/library/busybox@sha256:" + hex},
		{" busybox", ""},
		{"busybox:1.36@sha256:0", ""},
		{"", ""},
		{"Busybox", ""},
		{"docker.io/Foo/bar", ""},
		{hex, ""},
		{"foo@sha256:abc", ""},
		{"foo@sha256:" + strings.ToUpper(hex), ""},
		{"foo@md5:0123456789abcdef0123456789abcdef", ""},
		{"a:", ""},
		{":tag", ""},
		{"a//b", ""},
		{"-a", ""},
		{"a/b:bad tag", ""},
		{"a/b:" + strings.Repeat("t", 129), ""},
		{"a.b/" + strings.Repeat("c", 256), ""},
		{"bad_host.com:5000/x", ""},
	}
	for _, c := range cases {
		got, err := Normalize(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("Normalize(%q) = %q, want an error", c.in, got)
		case c.want == "" && !strings.Contains(err.Error(), c.in):
			t.Errorf("Normalize(%q): error %q does not name the reference", c.in, err)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
