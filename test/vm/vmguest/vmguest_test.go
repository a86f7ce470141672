//go:build jetlet_vm

package vmguest

import (
	"os"
	"path/filepath"
	"testing"
)

// A reboot a test asks for brings the guest back from the same disk, with
// the test's state on the share, and runs the test again on boot 2.
func TestRebootKeepsTheDisk(t *testing.T) {
	const mark = "/var/lib/vmguest-reboot-mark"
	state := filepath.Join(StateDir(t), "boots")
	switch Boot() {
	case 1:
		if err := os.WriteFile(mark, []byte("1"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, []byte("1"), 0o600); err != nil {
			t.Fatal(err)
		}
		Reboot(t)
	case 2:
		if _, err := os.Stat(mark); err != nil {
			t.Errorf("the guest's disk after a reboot: %v", err)
		}
		if b, err := os.ReadFile(state); err != nil || string(b) != "1" {
			t.Errorf("the test's state dir after a reboot: %q, %v", b, err)
		}
	default:
		t.Fatalf("boot %d: the test reboots once", Boot())
	}
}
