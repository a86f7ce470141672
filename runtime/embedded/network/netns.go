// Package network gives pod sandboxes of the embedded runtime their own network
// namespace, set up through CNI. It is the runtime's side: persistent network
// namespaces (bind-mounted, as iproute2's `ip netns add`), the CNI ADD and DEL
// through libcni, and starting a process inside a pod's namespaces. The shim
// never imports it.
package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// dirMu serialises making a namespace directory a mount and undoing it, so
// that Remove never unmounts the directory while Create mounts into it.
var dirMu sync.Mutex

// Create makes a new network namespace and keeps it alive by bind-mounting it
// at <dir>/<id>, whose path it returns. dir is made a private, unbindable
// mount of itself (as iproute2 does with /run/netns) so that the bind mounts
// propagate to no other mount namespace. The namespace is made on a thread
// that is then discarded: no thread of this process is ever left in it.
func Create(dir, id string) (string, error) {
	return keep(dir, id, func(path string) error {
		return onOwnThread(func() error {
			// The thread is never unlocked: it ends with the goroutine, taking
			// its place in the new namespace with it.
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare network namespace: %w", err)
			}
			self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
			if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind-mount network namespace at %s: %w", path, err)
			}
			return nil
		})
	})
}

// Adopt keeps the network namespace another process made (from, its
// /proc/<pid>/ns/net) alive at <dir>/<id> as Create keeps one: a pod's made
// in the pod's user namespace, which root in the pod then holds
// capabilities over.
func Adopt(dir, id, from string) (string, error) {
	return keep(dir, id, func(path string) error {
		if err := unix.Mount(from, path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount network namespace at %s: %w", path, err)
		}
		return nil
	})
}

// keep makes <dir>/<id> and has bind mount a namespace there.
func keep(dir, id string, bind func(path string) error) (string, error) {
	dirMu.Lock()
	defer dirMu.Unlock()
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", err
	}
	if err := makeUnbindable(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, id)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("create network namespace file: %w", err)
	}
	f.Close()
	if err := bind(path); err != nil {
		_ = os.Remove(path)
		_ = unmountIfEmpty(dir)
		return "", err
	}
	return path, nil
}

// makeUnbindable makes dir an unbindable mount (a private one that no bind
// mount copies), bind-mounting it on itself first when it is no mount point.
func makeUnbindable(dir string) error {
	err := unix.Mount("", dir, "none", unix.MS_UNBINDABLE, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s on itself: %w", dir, err)
		}
		err = unix.Mount("", dir, "none", unix.MS_UNBINDABLE, "")
	}
	if err != nil {
		return fmt.Errorf("make %s an unbindable mount: %w", dir, err)
	}
	return nil
}

// Remove unmounts and removes the namespace at path; the namespace itself
// ends with the last process in it. When path's directory is left empty, its
// own mount is undone too, so nothing stays mounted. Removing a namespace
// that is gone succeeds.
func Remove(path string) error {
	dirMu.Lock()
	defer dirMu.Unlock()
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace %s: %w", path, err)
	}
	return unmountIfEmpty(filepath.Dir(path))
}

// unmountIfEmpty undoes the mount Create made of dir once dir holds no
// namespace any more; dirMu must be held.
func unmountIfEmpty(dir string) error {
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// IsNamespace reports whether path is a mounted network namespace.
func IsNamespace(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// Namespace is a namespace file to enter: a network, UTS or IPC namespace
// (Type CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWIPC).
type Namespace struct {
	Path string
	Type int
}

// nsNames are the /proc/<pid>/ns names of the types a process is started in.
var nsNames = map[int]string{unix.CLONE_NEWNET: "net", unix.CLONE_NEWUTS: "uts", unix.CLONE_NEWIPC: "ipc"}

// StartIn starts cmd inside the namespaces. The fork happens on a locked
// thread moved into them and then back; a thread that cannot be moved back
// is discarded rather than reused.
func StartIn(cmd *exec.Cmd, namespaces ...Namespace) error {
	return in(namespaces, cmd.Start)
}

// DialLoopback connects to port on 127.0.0.1 in the network namespace at
// nsPath. A socket belongs to the namespace it was made in, so it is dialled
// from a thread moved into the namespace.
func DialLoopback(nsPath string, port int) (net.Conn, error) {
	var conn net.Conn
	err := in([]Namespace{{Path: nsPath, Type: unix.CLONE_NEWNET}}, func() error {
		var err error
		conn, err = net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return err
	})
	return conn, err
}

// in runs f on a locked thread moved into the namespaces and then back; a
// thread that cannot be moved back is discarded rather than reused.
func in(namespaces []Namespace, f func() error) error {
	targets := make([]*os.File, len(namespaces))
	defer closeAll(targets)
	for i, ns := range namespaces {
		if nsNames[ns.Type] == "" || !IsNamespace(ns.Path) {
			return fmt.Errorf("%s is not a %s namespace", ns.Path, nsNames[ns.Type])
		}
		var err error
		if targets[i], err = os.Open(ns.Path); err != nil {
			return fmt.Errorf("open %s namespace: %w", nsNames[ns.Type], err)
		}
	}
	return onOwnThread(func() error {
		origs := make([]*os.File, len(namespaces))
		defer closeAll(origs)
		for i, ns := range namespaces {
			var err error
			if origs[i], err = os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/%s", os.Getpid(), unix.Gettid(), nsNames[ns.Type])); err != nil {
				runtime.UnlockOSThread()
				return fmt.Errorf("open current %s namespace: %w", nsNames[ns.Type], err)
			}
		}
		back := func(n int) bool {
			ok := true
			for i := n - 1; i >= 0; i-- {
				ok = unix.Setns(int(origs[i].Fd()), namespaces[i].Type) == nil && ok
			}
			return ok
		}
		for i, ns := range namespaces {
			if err := unix.Setns(int(targets[i].Fd()), ns.Type); err != nil {
				if back(i) {
					runtime.UnlockOSThread()
				}
				return fmt.Errorf("enter %s namespace %s: %w", nsNames[ns.Type], ns.Path, err)
			}
		}
		fErr := f()
		if back(len(namespaces)) {
			runtime.UnlockOSThread()
		} // else the thread ends with the goroutine
		return fErr
	})
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// onOwnThread runs f on a goroutine locked to a thread other than the main
// one. f unlocks it when it leaves the thread as it found it; otherwise the
// thread ends with the goroutine. The main thread is avoided because the Go
// runtime never ends it: a goroutine ending locked to it leaves it parked for
// ever, in whatever namespace f left it.
func onOwnThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Holding the main thread, the nested goroutine cannot get it.
			done <- onOwnThread(f)
			runtime.UnlockOSThread()
			return
		}
		done <- f()
	}()
	return <-done
}
