package embedded

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
)

// hostPrivateDirs are host directories no container sees while a
// container's root is the host's tree: users' homes, and the runtime state,
// sockets, spools and logs of the host's services (another runtime's store,
// a NATS server's, a database's).
var hostPrivateDirs = []string{
	"/root", "/home", "/run",
	"/var/lib", "/var/log", "/var/spool", "/var/mail", "/var/backups",
}

// hostConfigDir is searched for what only privileged users of the host may
// read (shadow, ssh host keys, TLS private keys, NATS credentials).
const hostConfigDir = "/etc"

// hiddenHostPaths are the host paths a container's init empties in its root
// (shim.Isolation.HiddenPaths): the runtime's own state, image store and shim, the paths
// the runtime was told to hide (jetlet's data dir, binary and credentials),
// hostPrivateDirs, and what of etc other users of the host cannot read.
// Found once at Start: a file made unreadable in etc later is hidden from
// containers made after the next start.
func hiddenHostPaths(cfg Config, etc string) []string {
	paths := append([]string{cfg.Dir, cfg.ShimPath}, cfg.HiddenPaths...)
	if cfg.ImageDir != "" {
		paths = append(paths, cfg.ImageDir)
	}
	paths = append(paths, hostPrivateDirs...)
	paths = append(paths, privateFiles(etc)...)
	for i, p := range paths {
		if abs, err := filepath.Abs(p); err == nil {
			paths[i] = abs
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// privateFiles lists the files under dir that other users cannot read and
// the directories they cannot list or enter (not what is below those).
// Symbolic links are left alone: what they point at is judged where it is.
func privateFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				out = append(out, path)
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		mode := info.Mode()
		switch {
		case mode.IsDir() && mode.Perm()&0o005 != 0o005:
			out = append(out, path)
			return filepath.SkipDir
		case mode.IsRegular() && mode.Perm()&0o004 == 0:
			out = append(out, path)
		}
		return nil
	})
	return out
}
