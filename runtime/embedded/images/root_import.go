package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// RootArchive is, as `docker save` writes it, an image of one layer
// holding the tree under root, named ref, its config changed by changes:
// `docker import`'s, for a directory instead of a tarball. Each file keeps
// its mode, owner and times; hard links stay links; sockets are left out (as
// tar leaves them). The changes are docker import's --change instructions
// (CMD, ENTRYPOINT, ENV, WORKDIR, USER). The tree is read twice or more (the
// layer's digests, then its bytes): it must not change meanwhile. A bad
// reference, change or root, or a tree that cannot be read, is an error
// before anything is written; the archive is written as it is read.
func RootArchive(root, ref string, changes []string) (io.ReadCloser, error) {
	parsed, err := imageref.Parse(ref)
	if err != nil {
		return nil, err
	}
	if parsed.Digest != "" {
		return nil, fmt.Errorf("reference %q names a digest: an imported image is new content, name it by a tag", ref)
	}
	if st, err := os.Stat(root); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", root)
	}
	cfg, err := ParseChanges(changes)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(parsed.String(), name.StrictValidation)
	if err != nil {
		return nil, err
	}
	img, err := rootImage(root, cfg)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(tag, img, pw)) }()
	return pr, nil
}

// rootImage is the image of one layer of the tree under root, with cfg; its
// config (the layer's diff id) is computed here, so that a tree that cannot
// be read fails now.
func rootImage(root string, cfg v1.Config) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTree(pw, root)) }()
		return pr, nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{CreatedBy: "jetlet image import " + root}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Config = runtime.GOARCH, "linux", cfg
	return mutate.ConfigFile(img, cf)
}

// writeTree writes the tree under root as a layer's tar: paths relative to
// root in lexical order, hard links as links to the first path of their
// inode.
func writeTree(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		h.Name, h.Uname, h.Gname, h.Format = filepath.ToSlash(rel), "", "", tar.FormatPAX
		// Reading the tree changes access times: kept, they would make each
		// read's bytes differ from the digest's.
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := links[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				links[key] = h.Name
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, h.Size); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ParseChanges makes an image config of docker import's --change
// instructions: CMD and ENTRYPOINT (a JSON array, or a shell form run by
// /bin/sh -c), ENV (KEY=VALUE..., or KEY VALUE), WORKDIR and USER.
func ParseChanges(changes []string) (v1.Config, error) {
	var cfg v1.Config
	for _, c := range changes {
		instr, arg, _ := strings.Cut(strings.TrimSpace(c), " ")
		arg = strings.TrimSpace(arg)
		if arg == "" {
			return cfg, fmt.Errorf("change %q: %s needs an argument", c, instr)
		}
		var err error
		switch strings.ToUpper(instr) {
		case "CMD":
			cfg.Cmd, err = commandForm(arg)
		case "ENTRYPOINT":
			cfg.Entrypoint, err = commandForm(arg)
		case "ENV":
			var env []string
			if env, err = envForm(arg); err == nil {
				cfg.Env = append(cfg.Env, env...)
			}
		case "WORKDIR":
			cfg.WorkingDir = arg
		case "USER":
			cfg.User = arg
		default:
			err = errors.New("not one of CMD, ENTRYPOINT, ENV, WORKDIR, USER")
		}
		if err != nil {
			return cfg, fmt.Errorf("change %q: %w", c, err)
		}
	}
	return cfg, nil
}

// commandForm is a CMD's or ENTRYPOINT's argv: its exec form (a JSON array
// of strings) or its shell form, run by /bin/sh -c as Docker runs it.
func commandForm(arg string) ([]string, error) {
	if !strings.HasPrefix(arg, "[") {
		return []string{"/bin/sh", "-c", arg}, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(arg), &argv); err != nil {
		return nil, fmt.Errorf("not a JSON array of strings: %w", err)
	}
	return argv, nil
}

// envForm is an ENV's variables: KEY=VALUE pairs separated by spaces (a
// value in double quotes may hold spaces), or the legacy KEY VALUE.
func envForm(arg string) ([]string, error) {
	if k, v, ok := strings.Cut(arg, " "); ok && !strings.Contains(k, "=") {
		return []string{k + "=" + strings.TrimSpace(v)}, nil
	}
	var env []string
	for rest := arg; rest != ""; rest = strings.TrimLeft(rest, " ") {
		k, v, ok := strings.Cut(rest, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return nil, fmt.Errorf("%q is not KEY=VALUE", rest)
		}
		if strings.HasPrefix(v, `"`) {
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("%s: unterminated quote", k)
			}
			env, rest = append(env, k+"="+v[1:end+1]), v[end+2:]
			continue
		}
		val, next, _ := strings.Cut(v, " ")
		env, rest = append(env, k+"="+val), next
	}
	return env, nil
}
