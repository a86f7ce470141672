package kernel

import "testing"

func TestAtLeast(t *testing.T) {
	if Release() == "?" {
		t.Fatal("no kernel release")
	}
	if !AtLeast(3, 0) || AtLeast(1000, 0) {
		t.Errorf("kernel %s: AtLeast(3, 0) %v, AtLeast(1000, 0) %v", Release(), AtLeast(3, 0), AtLeast(1000, 0))
	}
}
