// Package mountinfo answers what is mounted where, from
// /proc/self/mountinfo: before a directory is removed (never through a
// mount), before a bind is made again.
package mountinfo

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IsMountPoint reports whether something is mounted on path in the
// caller's mount namespace (a bind of a directory of the same file system
// included, which a comparison of devices would miss).
func IsMountPoint(path string) (bool, error) {
	real, err := realPath(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	found := false
	err = eachMountPoint(func(mp string) bool {
		found = mp == real
		return !found
	})
	return found, err
}

// Under lists the mount points at or below dir, in mountinfo's order
// (a mount before those stacked or made below it later).
func Under(dir string) ([]string, error) {
	real, err := realPath(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	err = eachMountPoint(func(mp string) bool {
		if mp == real || strings.HasPrefix(mp, real+"/") {
			out = append(out, mp)
		}
		return true
	})
	return out, err
}

// realPath is path absolute and without symlinks, as mountinfo names mount
// points. The caller's paths are trusted: a symlink in them is followed.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// eachMountPoint calls f with each mount point of jetlet's mount namespace
// until f returns false.
func eachMountPoint(f func(string) bool) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ...
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 5 {
			continue
		}
		if !f(unescape(fields[4])) {
			return nil
		}
	}
	return sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
