package shim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

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

// mountPointsUnder lists through listmount(2) what /proc/self/mountinfo
// lists under a directory: nested mounts, a name with a space (escaped in
// mountinfo), a mount stacked on another's mount point (listed once),
// parents before children, and nothing of a sibling tree.
func TestMountPointsUnderListsWhatMountinfoDoes(t *testing.T) {
	dir := t.TempDir()
	top := filepath.Join(dir, "top")
	inMountNamespace(t, func() error {
		mount := func(path string) error {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
			return unix.Mount("tmpfs", path, "tmpfs", 0, "")
		}
		for _, p := range []string{top, filepath.Join(top, "a b"), filepath.Join(top, "a b", "c"), filepath.Join(top, "a b"), filepath.Join(top, "d"), filepath.Join(dir, "sibling")} {
			if err := mount(p); err != nil {
				return err
			}
		}
		want := []string{top, filepath.Join(top, "a b"), filepath.Join(top, "a b", "c"), filepath.Join(top, "d")}
		got, err := listMountPointsUnder(top)
		if errors.Is(err, errNoListmount) {
			return fmt.Errorf("listmount(2) not usable on %s: %w (Linux 6.8 or later has it)", top, err)
		}
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("through listmount: %q, want %q", got, want)
		}
		fromMountinfo, err := readMountPointsUnder(top)
		if err != nil {
			return err
		}
		if !slices.Equal(fromMountinfo, want) {
			return fmt.Errorf("through mountinfo: %q, want %q", fromMountinfo, want)
		}
		// The host's /sys, what a container's init asks for.
		sys, err := listMountPointsUnder("/sys")
		if err != nil {
			return err
		}
		sysFromMountinfo, err := readMountPointsUnder("/sys")
		if err != nil {
			return err
		}
		if !slices.Equal(sys, sysFromMountinfo) {
			return fmt.Errorf("/sys through listmount: %q, through mountinfo: %q", sys, sysFromMountinfo)
		}
		// A directory that is not a mount of its own: mountinfo answers.
		plain := filepath.Join(top, "d", "plain")
		if err := os.Mkdir(plain, 0o755); err != nil {
			return err
		}
		if _, err := listMountPointsUnder(plain); !errors.Is(err, errNoListmount) {
			return fmt.Errorf("listMountPointsUnder of a directory that is no mount root: %v, want errNoListmount", err)
		}
		if got, err := mountPointsUnder(plain); err != nil || len(got) != 0 {
			return fmt.Errorf("mountPointsUnder of a directory with no mount: %q, %v", got, err)
		}
		return nil
	})
}

// BenchmarkMountPointsUnder is what finding /sys's mounts costs a
// container's init beside a node's other mounts (two a pod: its network
// namespace and /dev/shm), through listmount(2) and through mountinfo.
func BenchmarkMountPointsUnder(b *testing.B) {
	for _, others := range []int{0, 2000} {
		for _, how := range []struct {
			name string
			list func() ([]string, error)
		}{
			{"listmount", func() ([]string, error) { return listMountPointsUnder("/sys") }},
			{"mountinfo", func() ([]string, error) { return readMountPointsUnder("/sys") }},
		} {
			b.Run(fmt.Sprintf("others=%d/%s", others, how.name), func(b *testing.B) {
				dir := b.TempDir()
				inMountNamespace(b, func() error {
					for i := range others {
						p := filepath.Join(dir, strconv.Itoa(i))
						if err := os.Mkdir(p, 0o755); err != nil {
							return err
						}
						if err := unix.Mount("tmpfs", p, "tmpfs", 0, ""); err != nil {
							return err
						}
					}
					for b.Loop() {
						if _, err := how.list(); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}
