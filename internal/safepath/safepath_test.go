package safepath

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/test/pathswap"
)

// bothWays runs f with openat2 and with the walk of kernels without it.
func bothWays(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			noOpenat2.Store(walk)
			t.Cleanup(func() { noOpenat2.Store(false) })
			f(t)
			if !walk && noOpenat2.Load() {
				t.Fatal("openat2 answered ENOSYS: its way was not tested")
			}
		})
	}
}

// newRoot makes a root directory (its path free of symlinks) and opens it,
// and an empty directory outside it, its sibling.
func newRoot(t *testing.T) (root string, rf *os.File, outside string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root, outside = filepath.Join(dir, "root"), filepath.Join(dir, "outside")
	must(t, os.Mkdir(root, 0o755))
	must(t, os.Mkdir(outside, 0o755))
	rf, err = os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rf.Close() })
	return root, rf, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fdPath is where the kernel says fd's object is.
func fdPath(t *testing.T, f *os.File) string {
	t.Helper()
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}

func TestOpen(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, rf, _ := newRoot(t)
		must(t, os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "dir", "file"), []byte("x"), 0o644))
		must(t, os.Mkdir(filepath.Join(root, "deep"), 0o755))
		for link, target := range map[string]string{
			"abs":       "/",
			"rel":       "../../../../../../../..",
			"out":       "../outside",
			"in":        "dir",
			"infile":    "dir/sub/../file",
			"deep/up":   "../dir",
			"deep/esc":  "../../outside",
			"climb":     "dir/../..",
			"loop":      "loop",
			"dangling":  "nothing",
			"absinside": filepath.Join(root, "dir"), // the host's path: not the root's
			"rootabs":   "/dir/sub",
			"dir/up":    "../../dir/file",
			"dir/top":   "/dir/file",
		} {
			must(t, os.Symlink(target, filepath.Join(root, link)))
		}
		wantOpens(t, rf, root, Beneath, []openCase{
			{rel: "", want: "."},
			{rel: ".", want: "."},
			{rel: "dir", want: "dir"},
			{rel: "dir/file", want: "dir/file"},
			{rel: "dir/./sub/", want: "dir/sub"},
			{rel: "dir/..", want: "."},
			{rel: "in", want: "dir"},
			{rel: "in/sub", want: "dir/sub"},
			{rel: "infile", want: "dir/file"},
			{rel: "deep/up/file", want: "dir/file"},
			{rel: "abs", err: ErrEscape},
			{rel: "abs/etc", err: ErrEscape},
			{rel: "rel", err: ErrEscape},
			{rel: "rel/etc/shadow", err: ErrEscape},
			{rel: "out", err: ErrEscape},
			{rel: "deep/esc", err: ErrEscape},
			{rel: "climb", err: ErrEscape},
			// An absolute symlink is refused even when it names a place
			// inside the root: on the host it is not the pod's path.
			{rel: "absinside", err: ErrEscape},
			{rel: "..", err: ErrEscape},
			{rel: "dir/../..", err: ErrEscape},
			{rel: "/etc", err: ErrEscape},
			{rel: "missing", err: unix.ENOENT},
			{rel: "dangling", err: unix.ENOENT},
			{rel: "dir/file/x", err: unix.ENOTDIR},
			{rel: "loop", err: unix.ELOOP},
			{rel: "rootabs", err: ErrEscape},
			{rel: "dir/up", err: ErrEscape},
			{rel: "dir/top", err: ErrEscape},
			// NoFollow: a trailing link out of the root is the link, not an
			// escape.
			{rel: "abs", mode: NoFollow, want: "abs"},
		})
		// InRoot resolves as if the root were /: absolute links and ".."
		// above the root stay in it, where Beneath refuses them.
		wantOpens(t, rf, root, InRoot, []openCase{
			{rel: "/", want: "."},
			{rel: "abs", want: "."},
			{rel: "abs/dir/file", want: "dir/file"},
			{rel: "rootabs", want: "dir/sub"},
			{rel: "rel/dir", want: "dir"},
			{rel: "climb/in/sub", want: "dir/sub"},
			{rel: "..", want: "."},
			{rel: "/../../dir", want: "dir"},
			{rel: "dir/up", want: "dir/file"},
			{rel: "dir/top", want: "dir/file"},
			{rel: "deep/esc", err: unix.ENOENT},
			{rel: "absinside", err: unix.ENOENT},
			{rel: "/etc", err: unix.ENOENT},
			{rel: "dir/file/x", err: unix.ENOTDIR},
			{rel: "loop", err: unix.ELOOP},
			// NoFollow opens a trailing link itself, and follows the others.
			{rel: "abs", mode: NoFollow, want: "abs"},
			{rel: "abs/in", mode: NoFollow, want: "in"},
			{rel: "abs/in/sub", mode: NoFollow, want: "dir/sub"},
			// NoSymlinks refuses every link.
			{rel: "dir/sub", mode: NoSymlinks, want: "dir/sub"},
			{rel: "in/sub", mode: NoSymlinks, err: unix.ELOOP},
			{rel: "abs", mode: NoSymlinks | NoFollow, want: "abs"}, // as the kernel does
		})
	})
}

// openCase is an Open of rel with mode added to the test's, and what it
// opens: want, relative to the root, or err.
type openCase struct {
	rel  string
	mode Mode
	want string
	err  error
}

// wantOpens checks each Open of cases beneath rf, whose path is root.
func wantOpens(t *testing.T, rf *os.File, root string, mode Mode, cases []openCase) {
	t.Helper()
	for _, tc := range cases {
		f, err := Open(rf, tc.rel, mode|tc.mode)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Open(%q, %b) = %v, want %v", tc.rel, mode|tc.mode, err, tc.err)
			}
			if f != nil {
				t.Errorf("Open(%q, %b) returned a file with %v: %s", tc.rel, mode|tc.mode, err, fdPath(t, f))
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q, %b): %v", tc.rel, mode|tc.mode, err)
			continue
		}
		if got, want := fdPath(t, f), filepath.Join(root, tc.want); got != want {
			t.Errorf("Open(%q, %b) opened %s, want %s", tc.rel, mode|tc.mode, got, want)
		}
		f.Close()
	}
}

func TestOpenDir(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, rf, _ := newRoot(t)
		must(t, os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755))
		must(t, unix.Mkfifo(filepath.Join(root, "fifo"), 0o644))
		must(t, os.Symlink("dir", filepath.Join(root, "in")))
		must(t, os.Symlink("/", filepath.Join(root, "abs")))
		d, err := OpenDir(rf, "in", Beneath)
		must(t, err)
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil || len(names) != 1 || names[0] != "sub" {
			t.Errorf("OpenDir(in) lists %v, %v; want [sub]", names, err)
		}
		for rel, want := range map[string]error{"fifo": unix.ENOTDIR, "abs": ErrEscape} {
			if d, err := OpenDir(rf, rel, Beneath); !errors.Is(err, want) {
				t.Errorf("OpenDir(%q) = %v, want %v", rel, err, want)
				if d != nil {
					d.Close()
				}
			}
		}
	})
}

// TestOpenRacesASwap swaps a directory and a symlink out of the root (to
// "/" and to a relative climb) while Open resolves through it: an open
// either finds the directory or fails, never lands outside.
func TestOpenRacesASwap(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		for _, target := range []string{"/", "../../../../../../.."} {
			root, rf, _ := newRoot(t)
			must(t, os.MkdirAll(filepath.Join(root, "d", "etc"), 0o755))
			must(t, os.Symlink(target, filepath.Join(root, "l")))
			i := 0
			found, refused := swapWhile(t, root, func() bool {
				rel := []string{"d", "d/etc"}[i%2]
				i++
				f, err := Open(rf, rel, Beneath)
				if err != nil {
					if !errors.Is(err, ErrEscape) {
						t.Errorf("Open(%q): %v, want a success or ErrEscape", rel, err)
					}
					return false
				}
				p := fdPath(t, f)
				f.Close()
				if !within(p, root) {
					t.Errorf("Open(%q) escaped to %s while a swap ran", rel, p)
				}
				return true
			})
			if found == 0 || refused == 0 {
				t.Errorf("link to %q: %d opens inside, %d refused: the swap did not race the opens", target, found, refused)
			}
			t.Logf("link to %q: %d opens inside, %d refused", target, found, refused)
		}
	})
}

// swapWhile exchanges root/d and root/l (renameat2 RENAME_EXCHANGE) in a
// loop while try runs; it counts try's true and false.
func swapWhile(t *testing.T, root string, try func() bool) (yes, no int) {
	t.Helper()
	stop := pathswap.Start(t, filepath.Join(root, "d"), filepath.Join(root, "l"))
	// At least 3000 tries, and on until both outcomes were seen (the
	// swapper may not get a core at once on a busy machine).
	for n := 0; n < 3000 || (yes == 0 || no == 0) && n < 200000; n++ {
		if try() {
			yes++
		} else {
			no++
		}
	}
	stop()
	return yes, no
}

func TestMkdirAll(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, rf, outside := newRoot(t)
		must(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
		must(t, os.Symlink("dir", filepath.Join(root, "in")))
		must(t, os.Symlink("../outside", filepath.Join(root, "out")))
		must(t, os.Symlink("/", filepath.Join(root, "abs")))

		old := unix.Umask(0o022)
		defer unix.Umask(old)
		f, err := MkdirAll(rf, "a/b/c", 0o777, Beneath)
		must(t, err)
		if got, want := fdPath(t, f), filepath.Join(root, "a/b/c"); got != want {
			t.Errorf("MkdirAll opened %s, want %s", got, want)
		}
		f.Close()
		for _, p := range []string{"a", "a/b", "a/b/c"} {
			fi, err := os.Stat(filepath.Join(root, p))
			must(t, err)
			if fi.Mode().Perm() != 0o777 {
				t.Errorf("%s: mode %v, want 0777 whatever the umask", p, fi.Mode())
			}
		}
		f, err = MkdirAll(rf, "in/x", 0o755, Beneath)
		must(t, err)
		if got, want := fdPath(t, f), filepath.Join(root, "dir/x"); got != want {
			t.Errorf("MkdirAll through a symlink inside opened %s, want %s", got, want)
		}
		f.Close()
		f, err = MkdirAll(rf, "dir", 0o755, Beneath)
		must(t, err)
		f.Close()
		f, err = MkdirAll(rf, "none/../made", 0o755, Beneath)
		must(t, err)
		f.Close()
		if _, err := os.Stat(filepath.Join(root, "none")); err == nil {
			t.Error(`MkdirAll("none/../made") made none`)
		}

		for _, tc := range []struct {
			rel string
			err error
		}{
			{"out/x", ErrEscape},
			{"abs/tmp/x", ErrEscape},
			{"../x", ErrEscape},
			{"/x", ErrEscape},
			{"file", unix.ENOTDIR},
			{"file/x", unix.ENOTDIR},
		} {
			f, err := MkdirAll(rf, tc.rel, 0o777, Beneath)
			if !errors.Is(err, tc.err) {
				t.Errorf("MkdirAll(%q) = %v, want %v", tc.rel, err, tc.err)
			}
			if f != nil {
				f.Close()
			}
		}
		if entries, _ := os.ReadDir(outside); len(entries) > 0 {
			t.Errorf("MkdirAll made %v outside the root", entries)
		}
	})
}

// TestMkdirAllRacesASwap makes d/new/x while d is swapped with a symlink to
// a directory outside the root: nothing is ever made there.
func TestMkdirAllRacesASwap(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, rf, outside := newRoot(t)
		must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
		must(t, os.Symlink("../outside", filepath.Join(root, "l")))
		made, refused := swapWhile(t, root, func() bool {
			f, err := MkdirAll(rf, "d/new/x", 0o777, Beneath)
			if err != nil {
				return false
			}
			p := fdPath(t, f)
			f.Close()
			if !within(p, root) {
				t.Errorf("MkdirAll escaped to %s", p)
			}
			// Made again next time, wherever d is then.
			os.Remove(p)
			os.Remove(filepath.Dir(p))
			return true
		})
		if entries, _ := os.ReadDir(outside); len(entries) > 0 {
			t.Errorf("MkdirAll made %v outside the root while a swap ran", entries)
		}
		t.Logf("%d made inside, %d refused", made, refused)
	})
}

// TestMakeInRoot makes directories and files through links that name the
// root's own paths: what is made is in the root, whatever the links say.
func TestMakeInRoot(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, rf, outside := newRoot(t)
		must(t, os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
		for link, target := range map[string]string{"lib": "/usr/lib", "out": outside, "up": "../../..", "dangling": "/made"} {
			must(t, os.Symlink(target, filepath.Join(root, link)))
		}
		old := unix.Umask(0o022)
		defer unix.Umask(old)
		for p, want := range map[string]string{
			"/lib/new/dir": "usr/lib/new/dir", // through the link inside the root
			"/out/x":       strings.TrimPrefix(outside, "/") + "/x",
			"/up/etc":      "etc",
			"dangling/d":   "made/d",
		} {
			f, err := MkdirAll(rf, p, 0o770, InRoot)
			if err != nil {
				t.Errorf("MkdirAll(%q): %v", p, err)
				continue
			}
			if got := fdPath(t, f); got != filepath.Join(root, want) {
				t.Errorf("MkdirAll(%q) opened %s, want %s", p, got, filepath.Join(root, want))
			}
			f.Close()
			if fi, err := os.Stat(filepath.Join(root, want)); err != nil || fi.Mode().Perm() != 0o770 {
				t.Errorf("%s: %v, %v; want 0770 whatever the umask", want, fi, err)
			}
		}
		f, err := MkfileAll(rf, "/up/new/file", 0o700, 0o640, InRoot)
		must(t, err)
		if got := fdPath(t, f); got != filepath.Join(root, "new/file") {
			t.Errorf("MkfileAll opened %s, want %s", got, filepath.Join(root, "new/file"))
		}
		f.Close()
		for p, perm := range map[string]os.FileMode{"new": 0o700, "new/file": 0o640} {
			if fi, err := os.Lstat(filepath.Join(root, p)); err != nil || fi.Mode() != perm && fi.Mode() != perm|os.ModeDir {
				t.Errorf("%s: %v, %v; want %v", p, fi, err, perm)
			}
		}
		// An existing file is opened, whatever it is; MkdirAll wants a
		// directory.
		f, err = MkfileAll(rf, "lib", 0o755, 0o644, InRoot)
		must(t, err)
		if got := fdPath(t, f); got != filepath.Join(root, "usr/lib") {
			t.Errorf("MkfileAll(lib) opened %s", got)
		}
		f.Close()
		if _, err := MkdirAll(rf, "file/x", 0o755, InRoot); !errors.Is(err, unix.ENOTDIR) {
			t.Errorf("MkdirAll(file/x) = %v, want ENOTDIR", err)
		}
		if _, err := MkdirAll(rf, "lib", 0o755, InRoot|NoSymlinks); !errors.Is(err, unix.ELOOP) {
			t.Errorf("MkdirAll(lib, NoSymlinks) = %v, want ELOOP", err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) > 0 {
			t.Errorf("made %v outside the root", entries)
		}
	})
}

// TestInRootRacesASwap swaps a directory and a link to the host's / while
// Open and MkdirAll resolve InRoot through it: both land in the root, by
// the directory or by the link re-rooted, and make nothing outside.
func TestInRootRacesASwap(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		root, rf, _ := newRoot(t)
		must(t, os.MkdirAll(filepath.Join(root, "d", "etc"), 0o755))
		must(t, os.Mkdir(filepath.Join(root, "etc"), 0o755))
		must(t, os.Symlink("/", filepath.Join(root, "l")))
		i := 0
		viaDir, viaLink := swapWhile(t, root, func() bool {
			i++
			var f *os.File
			var err error
			if i%2 == 0 {
				f, err = Open(rf, "d/etc", InRoot)
			} else {
				f, err = MkdirAll(rf, "d/etc/new", 0o755, InRoot)
			}
			if err != nil {
				t.Errorf("in the root: %v", err)
				return false
			}
			p := fdPath(t, f)
			f.Close()
			if !within(p, root) {
				t.Errorf("escaped to %s while a swap ran", p)
			}
			return strings.HasPrefix(p, filepath.Join(root, "d")+"/")
		})
		if viaDir == 0 || viaLink == 0 {
			t.Errorf("%d through the directory, %d through the link: the swap did not race the opens", viaDir, viaLink)
		}
		if _, err := os.Stat("/etc/new"); err == nil {
			t.Error("/etc/new was made on the host")
		}
	})
}
