package client

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jetlet/jetlet/schemas"
)

// Copies in and out of a container are tar over an exec stream, as
// kubectl cp: the container needs a tar (busybox's will do).

// maxTarStderr bounds what the container's tar printed that an error
// quotes.
const maxTarStderr = 4 << 10

// CopyFrom copies the file or tree remote in container (empty: the only
// one) of pod p to local, which becomes its copy (modes and symlinks
// kept, as tar has them). Nothing is written outside local: an entry
// that would be, through a name or a symlink the archive made, is an
// error. Entries that are neither files, directories nor links are
// skipped, each told to warn.
func (c *Client) CopyFrom(ctx context.Context, p *Pod, container, remote, local string, warn io.Writer) error {
	dir, base, err := remoteSplit(remote)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &limitedBuffer{max: maxTarStderr}
	go func() {
		code, err := c.Stream(ctx, p, schemas.StreamRequest{PodRef: p.Ref(container), Kind: schemas.StreamExec,
			Command: []string{"tar", "cf", "-", "-C", dir, base}}, StreamIO{Stdout: pw, Stderr: stderr})
		if err == nil && code != 0 {
			err = fmt.Errorf("tar in the container exited %d: %s", code, strings.TrimSpace(stderr.String()))
		}
		pw.CloseWithError(err)
	}()
	err = untar(pr, base, local, warn)
	pr.CloseWithError(errors.New("copy stopped"))
	return err
}

// CopyTo copies the local file or tree to remote in container (empty:
// the only one) of pod p, which becomes its copy (modes and symlinks
// kept; the container's tar extracts it).
func (c *Client) CopyTo(ctx context.Context, p *Pod, container, local, remote string) error {
	dir, base, err := remoteSplit(remote)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(local); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, local, base)) }()
	stderr := &limitedBuffer{max: maxTarStderr}
	code, err := c.Stream(ctx, p, schemas.StreamRequest{PodRef: p.Ref(container), Kind: schemas.StreamExec, Stdin: true,
		Command: []string{"tar", "xmf", "-", "-C", dir}}, StreamIO{Stdin: pr, Stdout: io.Discard, Stderr: stderr})
	pr.CloseWithError(errors.New("copy stopped"))
	if err == nil && code != 0 {
		err = fmt.Errorf("tar in the container exited %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	return err
}

// remoteSplit is a container path's directory and last name.
func remoteSplit(remote string) (dir, base string, err error) {
	if !path.IsAbs(remote) {
		remote = "/" + remote // kubectl's: relative to the container's root
	}
	remote = path.Clean(remote)
	if remote == "/" {
		return "", "", errors.New("copy a file or a directory, not /")
	}
	return path.Dir(remote), path.Base(remote), nil
}

// writeTar writes local's tree as a tar whose names start with base,
// never following a symlink.
func writeTar(w io.Writer, local, base string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(local, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(name); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rel, err := filepath.Rel(local, name)
		if err != nil {
			return err
		}
		hdr.Name = path.Join(base, filepath.ToSlash(rel))
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// untar extracts a tar whose names start with base to local: base itself
// becomes local. A tree is written through an os.Root opened on local,
// so that no name or symlink of the archive reaches outside it.
func untar(r io.Reader, base, local string, warn io.Writer) error {
	parent, err := os.OpenRoot(filepath.Dir(local))
	if err != nil {
		return err
	}
	defer parent.Close()
	top := filepath.Base(local)
	var (
		tree *os.Root // local, once the archive's top is a directory
		dirs []*tar.Header
		seen bool
	)
	defer func() {
		if tree != nil {
			tree.Close()
		}
	}()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(strings.TrimSuffix(path.Clean(hdr.Name), "/"), base)
		rel = strings.TrimPrefix(rel, "/")
		if !ok || (rel != "" && !filepath.IsLocal(rel)) {
			return fmt.Errorf("the archive's entry %q is not under %q", hdr.Name, base)
		}
		root, name := tree, rel
		if rel == "" {
			root, name, seen = parent, top, true
		} else if tree == nil {
			return fmt.Errorf("the archive's entry %q comes before its directory %q", hdr.Name, base)
		}
		mode := fs.FileMode(hdr.Mode).Perm() | fs.FileMode(hdr.Mode)&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return err
			}
			if rel == "" {
				if tree, err = parent.OpenRoot(top); err != nil {
					return err
				}
			}
			h := *hdr
			h.Name, h.Mode = rel, int64(mode)
			dirs = append(dirs, &h)
		case tar.TypeReg:
			if err := writeEntry(root, name, mode, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := removeEntry(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			target, ok := strings.CutPrefix(path.Clean(hdr.Linkname), base+"/")
			if !ok || tree == nil || !filepath.IsLocal(target) {
				return fmt.Errorf("the archive's hard link %q -> %q is not within the copy", hdr.Name, hdr.Linkname)
			}
			if err := removeEntry(root, name); err != nil {
				return err
			}
			if err := tree.Link(target, name); err != nil {
				return err
			}
		default:
			fmt.Fprintf(warn, "skipped %s: not a file, directory or link\n", hdr.Name)
		}
	}
	if !seen {
		return fmt.Errorf("the archive has no %q", base)
	}
	// Directories get their modes last: a read-only one took its files
	// first.
	for i := len(dirs) - 1; i >= 0; i-- {
		root, name := tree, dirs[i].Name
		if name == "" {
			root, name = parent, top
		}
		if err := root.Chmod(name, fs.FileMode(dirs[i].Mode)); err != nil {
			return err
		}
	}
	return nil
}

// writeEntry writes a regular file afresh: whatever was at name (a
// symlink too) is replaced, not written through.
func writeEntry(root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	if err := removeEntry(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	err = errors.Join(err, f.Chmod(mode), f.Close())
	return err
}

// removeEntry removes a file or symlink at name, if any (not a
// directory: a file in the archive does not replace a tree).
func removeEntry(root *os.Root, name string) error {
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it and takes the
// rest without keeping it.
type limitedBuffer struct {
	max int
	b   []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b = append(l.b, p[:min(len(p), l.max-len(l.b))]...)
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
