package reconcile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/mountinfo"
	"github.com/jetlet/jetlet/internal/safepath"
)

// volumeSubpathsDir holds the bind mounts of the pod's subPaths, kubelet's
// layout: <pod>/volume-subpaths/<volume>/<container>/<mount index>.
const volumeSubpathsDir = "volume-subpaths"

// subPathMount is one volume mount with a subPath: the volume's host
// directory and the path under it (subPathExpr already expanded).
type subPathMount struct {
	uid, volume, container string
	// index is the mount's index in the container's volumeMounts.
	index int
	// volumePath is the volume's host directory, jetlet's or the spec's
	// (hostPath); what is beneath it may be the pod's.
	volumePath, subPath string
	// create: a missing subPath is made, as a directory of the volume
	// root's mode (kubelet's SafeMakeDir): emptyDir and hostPath volumes.
	// The volumes of API data are the writer's: a missing one is an error.
	create bool
}

// bindSubPath gives the CRI a host path for a subPath that nothing the pod
// does can redirect, as kubelet's doBindSubPath (CVE-2017-1002101,
// CVE-2021-25741): the subPath is resolved beneath the volume without
// following a symlink out of it (internal/safepath), held open, and the
// object opened is bind-mounted from its descriptor (/proc/self/fd/N, a
// slave of the volume's mount) on
// <pod>/volume-subpaths/<volume>/<container>/<index>, a path only jetlet
// reaches; that is what the CRI mounts. A bind already there of the same
// object (a restarted container, a restarted jetlet) is kept. The binds
// live until the pod's data dir is removed (cleanSubPaths). It needs
// CAP_SYS_ADMIN: without it a subPath is an error.
func (m *Kuberuntime) bindSubPath(sp subPathMount) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("subPath %q: %w", sp.subPath, err)
	}
	rfd, err := unix.Open(sp.volumePath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open the volume: %w", err))
	}
	root := os.NewFile(uintptr(rfd), sp.volumePath)
	defer root.Close()
	f, err := safepath.Open(root, sp.subPath, safepath.Beneath)
	if errors.Is(err, unix.ENOENT) && sp.create {
		var st unix.Stat_t
		if err = unix.Fstat(rfd, &st); err == nil {
			f, err = safepath.MkdirAll(root, sp.subPath, fileMode(st.Mode), safepath.Beneath)
		}
	}
	if err != nil {
		return fail(subPathError(err))
	}
	defer f.Close()
	var want unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &want); err != nil {
		return fail(err)
	}
	dir, err := m.makePodDataDir(sp.uid, volumeSubpathsDir, sp.volume, sp.container)
	if err != nil {
		return fail(err)
	}
	target := filepath.Join(dir, strconv.Itoa(sp.index))
	mounted, err := mountinfo.IsMountPoint(target)
	if err != nil {
		return fail(err)
	}
	if mounted {
		if sameObject(target, &want) {
			return target, nil
		}
		// The pod's subPath is another object now: bound again.
		if err := unix.Unmount(target, 0); err != nil {
			return fail(fmt.Errorf("unmount the former bind: %w", err))
		}
	}
	if err := makeBindTarget(target, want.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return fail(err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), target, "", unix.MS_BIND, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fail(fmt.Errorf("jetlet bind-mounts a subPath, which it cannot do without root: %w", err))
		}
		return fail(fmt.Errorf("bind mount: %w", err))
	}
	// A slave: mounts made under the volume on the host reach the bind
	// (mountPropagation HostToContainer asks for them, and containerd
	// wants its source shared or a slave), none made on the bind goes back.
	err = unix.Mount("", target, "", unix.MS_SLAVE, "")
	if err == nil && !sameObject(target, &want) {
		err = errors.New("the bind mount is not the object opened")
	}
	if err != nil {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		return fail(err)
	}
	return target, nil
}

// subPathError says what is wrong with a subPath without the host's paths.
func subPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, safepath.ErrEscape):
		return errors.New("resolves outside the volume (through a symlink out of it)")
	case errors.Is(err, unix.ENOENT):
		return errors.New("no such file or directory in the volume")
	case errors.Is(err, unix.ENOTDIR):
		return errors.New("a component is not a directory")
	case errors.Is(err, unix.ELOOP):
		return errors.New("too many symlinks")
	}
	return err
}

// fileMode is a stat mode's permission bits as an os.FileMode.
func fileMode(mode uint32) os.FileMode {
	m := os.FileMode(mode) & os.ModePerm
	if mode&unix.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	if mode&unix.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&unix.S_ISVTX != 0 {
		m |= os.ModeSticky
	}
	return m
}

// sameObject reports whether path is now the object of want (device and
// inode).
func sameObject(path string, want *unix.Stat_t) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino
}

// makeBindTarget makes the mount point of a bind, a directory for a
// directory and an empty file for anything else (kubelet's: a file takes
// any other type), replacing one of the other type (not a mount: the
// caller checked).
func makeBindTarget(target string, dir bool) error {
	fi, err := os.Lstat(target)
	switch {
	case err == nil && fi.IsDir() == dir:
		return nil
	case err == nil:
		if err := os.Remove(target); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if dir {
		return os.Mkdir(target, podDirMode)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// cleanSubPaths unmounts and removes the pod's subPath binds, as kubelet's
// CleanSubPaths: each target unmounted, then removed alone (rmdir or
// unlink, never recursively: a bind that would not unmount keeps its
// volume's files, and the error says so).
func (m *Kuberuntime) cleanSubPaths(uid string) error {
	top := filepath.Join(m.podDataDir(uid), volumeSubpathsDir)
	volumes, err := os.ReadDir(top)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range volumes {
		vdir := filepath.Join(top, v.Name())
		containers, err := os.ReadDir(vdir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range containers {
			cdir := filepath.Join(vdir, c.Name())
			targets, err := os.ReadDir(cdir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, tg := range targets {
				errs = append(errs, unmountAndRemove(filepath.Join(cdir, tg.Name())))
			}
			errs = append(errs, os.Remove(cdir))
		}
		errs = append(errs, os.Remove(vdir))
	}
	errs = append(errs, os.Remove(top))
	return errors.Join(errs...)
}

// unmountAndRemove unmounts what is mounted on target (binds stacked by a
// crash included) and removes the mount point.
func unmountAndRemove(target string) error {
	for {
		mounted, err := mountinfo.IsMountPoint(target)
		if err != nil {
			return err
		}
		if !mounted {
			break
		}
		if err := unix.Unmount(target, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return os.Remove(target)
}
