package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A root directory becomes an image as docker import makes one of a
// tarball: its files, links and modes, named by the reference normalised,
// with the config the changes say; the store imports it like any archive.
func TestRootArchiveImportsADirectory(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "bin", "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755))
	must(os.Link(filepath.Join(root, "bin", "tool"), filepath.Join(root, "bin", "alias")))
	must(os.Symlink("tool", filepath.Join(root, "bin", "sh")))
	must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(root, "etc", "motd"), []byte("hello\n"), 0o600))

	archive, err := RootArchive(root, "example.com/team/tool:v1", []string{`CMD ["sh"]`, "ENV PATH=/bin A=\"b c\"", "WORKDIR /etc", "USER 1000"})
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	s := openStore(t, Options{})
	ims, err := s.Import(t.Context(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 1 || !slices.Equal(ims[0].RepoTags, []string{"example.com/team/tool:v1"}) {
		t.Fatalf("imported %+v, want one image example.com/team/tool:v1", ims)
	}
	im := ims[0]
	cfg := im.Config
	if !slices.Equal(cfg.Cmd, []string{"sh"}) || !slices.Equal(cfg.Env, []string{"PATH=/bin", "A=b c"}) || cfg.WorkingDir != "/etc" || cfg.User != "1000" {
		t.Errorf("config %+v", cfg)
	}
	for name, want := range map[string]string{"bin/tool": "#!/bin/sh\necho tool\n", "bin/alias": "#!/bin/sh\necho tool\n", "bin/sh": "#!/bin/sh\necho tool\n", "etc/motd": "hello\n"} {
		got, err := s.ReadFile(im, name)
		if err != nil || string(got) != want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	layers := s.LayerDirs(im)
	if len(layers) != 1 {
		t.Fatalf("layers %v, want one", layers)
	}
	for name, mode := range map[string]os.FileMode{"bin/tool": 0o755, "etc/motd": 0o600} {
		fi, err := os.Lstat(filepath.Join(layers[0], name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s in the layer: %v %v, want mode %v", name, fi, err, mode)
		}
	}
	if fi, err := os.Lstat(filepath.Join(layers[0], "bin", "sh")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("bin/sh in the layer is not a symlink: %v %v", fi, err)
	}
	a, errA := os.Stat(filepath.Join(layers[0], "bin", "tool"))
	b, errB := os.Stat(filepath.Join(layers[0], "bin", "alias"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("bin/alias is not a hard link of bin/tool in the layer: %v %v", errA, errB)
	}
}

func TestRootArchiveRefusesBadInput(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, root, ref string
		changes         []string
		want            string
	}{
		{"bad reference", root, "Busybox", nil, "repository name must be lowercase"},
		{"a digest", root, "busybox@sha256:" + hex, nil, "names a digest"},
		{"no such root", filepath.Join(root, "missing"), "busybox", nil, "no such file"},
		{"a file as root", file, "busybox", nil, "not a directory"},
		{"unknown instruction", root, "busybox", []string{"RUN make"}, "not one of CMD"},
		{"bad exec form", root, "busybox", []string{`CMD ["sh"`}, "not a JSON array"},
		{"no argument", root, "busybox", []string{"WORKDIR"}, "needs an argument"},
		{"bad env", root, "busybox", []string{"ENV A=1 =2"}, "is not KEY=VALUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := RootArchive(tt.root, tt.ref, tt.changes)
			if err == nil {
				rc.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestParseChangesShellForm(t *testing.T) {
	cfg, err := ParseChanges([]string{"ENTRYPOINT httpd -f", "ENV HOME /root"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/bin/sh", "-c", "httpd -f"}) || !slices.Equal(cfg.Env, []string{"HOME=/root"}) {
		t.Errorf("config %+v", cfg)
	}
}
