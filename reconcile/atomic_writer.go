package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// fileProjection is one file of a volume's payload: what is written at a
// path relative to the volume, with its mode. data may be a Secret's: it is
// never formatted.
type fileProjection struct {
	data []byte
	mode int32
}

// The names the atomic writer reserves in a volume (kubelet's: every name
// starting with ".." is the writer's).
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsDirLayout names each generation ..<UTC time>.<random>.
	tsDirLayout = "..2006_01_02_15_04_05."
)

// atomicWriter projects a payload into a volume directory as kubelet's
// AtomicWriter (pkg/volume/util/atomic_writer.go): the files go into a new
// timestamped directory, the ..data symlink is swapped to it with one rename,
// and each user-visible top-level name is a symlink through ..data, so that
// a reader sees the old generation or the new one, never a mix. A payload
// equal to what is there (content and mode) writes nothing. After the swap
// the generations before the previous one (and any a crash left) are
// removed: the previous one stays until the next write, so that a reader who
// resolved ..data just before the swap still finds its files (kubelet
// removes it at once, and such a reader gets ENOENT). One writer per volume
// at a time (the pod's sync).
type atomicWriter struct {
	dir string
	// gid is the pod's fsGroup: the generation's files and directories are
	// that group's and group-readable (kubelet's SetVolumeOwnership of a
	// read-only volume: mode | 0440, directories | 0550 and setgid).
	gid *int64
	now time.Time
}

// write projects payload and reports whether it wrote a new generation.
func (w atomicWriter) write(payload map[string]fileProjection) (bool, error) {
	clean, err := validatePayload(payload)
	if err != nil {
		return false, err
	}
	oldTs, err := os.Readlink(filepath.Join(w.dir, dataDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	var stale []string
	if oldTs != "" {
		stale, err = w.pathsToRemove(filepath.Join(w.dir, oldTs), clean)
		if err != nil {
			return false, err
		}
		if len(stale) == 0 && !w.changed(filepath.Join(w.dir, oldTs), clean) {
			return false, w.createUserVisibleFiles(clean)
		}
	}
	tsDir, err := os.MkdirTemp(w.dir, w.now.UTC().Format(tsDirLayout))
	if err != nil {
		return false, err
	}
	tsName := filepath.Base(tsDir)
	if err := w.writeGeneration(tsDir, clean); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	// The swap: a new symlink renamed over ..data.
	tmpLink := filepath.Join(w.dir, newDataDirName)
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	if err := os.Symlink(tsName, tmpLink); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	if err := os.Rename(tmpLink, filepath.Join(w.dir, dataDirName)); err != nil {
		_ = os.Remove(tmpLink)
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	if err := w.createUserVisibleFiles(clean); err != nil {
		return true, err
	}
	for _, p := range stale {
		// Only top-level names are user-visible; the rest went with the old
		// generation.
		if !strings.Contains(p, "/") {
			if err := os.Remove(filepath.Join(w.dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return true, err
			}
		}
	}
	return true, w.removeOldGenerations(tsName, oldTs)
}

// validatePayload cleans each path and refuses the ones that would leave the
// volume or take a name the writer reserves.
func validatePayload(payload map[string]fileProjection) (map[string]fileProjection, error) {
	clean := make(map[string]fileProjection, len(payload))
	for p, f := range payload {
		c := path.Clean(p)
		switch {
		case p == "" || path.IsAbs(p):
			return nil, fmt.Errorf("invalid path %q: must be relative", p)
		case c == ".." || strings.HasPrefix(c, "../") || strings.Contains(c, "/../"):
			return nil, fmt.Errorf("invalid path %q: must not contain '..'", p)
		case strings.HasPrefix(c, ".."):
			return nil, fmt.Errorf("invalid path %q: must not start with '..'", p)
		case c == ".":
			return nil, fmt.Errorf("invalid path %q: names no file", p)
		}
		clean[c] = f
	}
	return clean, nil
}

// fileMode is the mode a projected file gets.
func (w atomicWriter) fileMode(f fileProjection) os.FileMode {
	m := os.FileMode(f.mode) & os.ModePerm
	if w.gid != nil {
		m |= 0o440
	}
	return m
}

// changed reports whether any file of payload differs from the generation
// in tsDir, in content or mode.
func (w atomicWriter) changed(tsDir string, payload map[string]fileProjection) bool {
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		fi, err := os.Lstat(full)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != w.fileMode(f) {
			return true
		}
		data, err := os.ReadFile(full)
		if err != nil || !bytes.Equal(data, f.data) {
			return true
		}
	}
	return false
}

// pathsToRemove lists the paths (files and directories, relative) of the
// generation in tsDir that the payload no longer has.
func (w atomicWriter) pathsToRemove(tsDir string, payload map[string]fileProjection) ([]string, error) {
	keep := map[string]bool{}
	for p := range payload {
		for d := p; d != "."; d = path.Dir(d) {
			keep[d] = true
		}
	}
	var out []string
	err := filepath.WalkDir(tsDir, func(full string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(tsDir, full)
		if err != nil || rel == "." {
			return err
		}
		if rel = filepath.ToSlash(rel); !keep[rel] {
			out = append(out, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		// ..data names nothing (a crash mid-removal): all is to write.
		return nil, nil
	}
	return out, err
}

// writeGeneration writes the payload into the new generation's directory,
// owned by the fsGroup when there is one.
func (w atomicWriter) writeGeneration(tsDir string, payload map[string]fileProjection) error {
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return err
	}
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.data, w.fileMode(f)); err != nil {
			return err
		}
		// WriteFile honours the umask; the mode is as asked.
		if err := os.Chmod(full, w.fileMode(f)); err != nil {
			return err
		}
	}
	if w.gid == nil {
		return nil
	}
	gid := int(*w.gid)
	return filepath.WalkDir(tsDir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(full, -1, gid); err != nil {
			return fmt.Errorf("fsGroup %d: %w", gid, err)
		}
		if !d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(full, fi.Mode().Perm()|0o550|os.ModeSetgid)
	})
}

// createUserVisibleFiles links each top-level name of the payload through
// ..data, where no such link is yet.
func (w atomicWriter) createUserVisibleFiles(payload map[string]fileProjection) error {
	for p := range payload {
		top, _, _ := strings.Cut(p, "/")
		link := filepath.Join(w.dir, top)
		if _, err := os.Lstat(link); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink(filepath.Join(dataDirName, top), link); err != nil {
			return err
		}
	}
	return nil
}

// removeOldGenerations removes every generation but current and previous
// (the one ..data named before the swap), any a crash left included.
func (w atomicWriter) removeOldGenerations(current, previous string) error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || !strings.HasPrefix(n, "..") || n == current || n == previous {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.dir, n)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
