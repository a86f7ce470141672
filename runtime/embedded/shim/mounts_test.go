package shim

import "testing"

func TestUnescapeMountPoint(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`:  "/mnt/a b",
		`/mnt/tab\011`: "/mnt/tab\t",
		`/mnt/back\\`:  `/mnt/back\\`,
		`/plain`:       "/plain",
	} {
		if got := unescapeMountPoint(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
