package proc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lockWatch tells when the flock on a shim's lock file is released (the
// shim recorded an exit, or died), without a thread per lock: a blocking
// flock holds an OS thread for as long as it waits, and a node of 1,000
// pods has 3,000 locks held for days. It follows the lock files' closes
// through one inotify instance read by the Go poller: a lock is released
// when the last descriptor of the file open that took it is closed (by the
// shim, or by the kernel as the shim dies), which inotify reports as
// IN_CLOSE_WRITE (the shims open their locks read-write). The runtime opens
// lock files read-only, so that its own checks report nothing.
type lockWatch struct {
	ino *os.File // the inotify instance, non-blocking, read by the poller
	fd  int      // ino's descriptor (ino.Fd() would make reads block a thread)

	// mu guards waiters, and orders adding and removing watches (the
	// kernel gives the watch of one file to every waiter on it).
	mu      sync.Mutex
	waiters map[int32][]*lockWaiter // by inotify watch descriptor
	closed  bool                    // no inotify: stopped (fd may be another file's now), or none to be had
}

// lockWaiter is one caller waiting for one lock's release.
type lockWaiter struct {
	f    *os.File // the lock file, open read-only while waiting
	wd   int32
	done chan struct{}
}

// closedChan is a released lock that nobody had to wait for.
var closedChan = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// newLockWatch starts a lockWatch. Without inotify (out of instances, say)
// it returns one whose waits each take a thread, and the error.
func newLockWatch() (*lockWatch, error) {
	w := &lockWatch{waiters: map[int32][]*lockWaiter{}}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		w.closed = true
		return w, fmt.Errorf("inotify: %w", err)
	}
	w.ino, w.fd = os.NewFile(uintptr(fd), "inotify"), fd
	go w.read()
	return w, nil
}

// released returns a channel closed once nobody holds the flock on path; it
// is closed at once when path cannot be opened (no shim ever ran there).
func (w *lockWatch) released(path string) <-chan struct{} {
	done := make(chan struct{})
	f, err := os.Open(path)
	if err != nil {
		close(done)
		return done
	}
	w.mu.Lock()
	wd, err := -1, errors.New("the runtime has stopped")
	if !w.closed {
		wd, err = unix.InotifyAddWatch(w.fd, path, unix.IN_CLOSE_WRITE)
	}
	if err != nil {
		w.mu.Unlock()
		// No watch to be had (out of inotify watches, or stopped): a
		// thread waits.
		go func() {
			waitFlock(f)
			f.Close()
			close(done)
		}()
		return done
	}
	lw := &lockWaiter{f: f, wd: int32(wd), done: done}
	w.waiters[lw.wd] = append(w.waiters[lw.wd], lw)
	w.mu.Unlock()
	// Released before the watch was added: no close will be reported.
	w.check(lw, false, false)
	return done
}

// read handles inotify's events until its file is closed.
func (w *lockWatch) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.ino.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.checkAll() // closes were lost
				continue
			}
			w.mu.Lock()
			waiting := slices.Clone(w.waiters[ev.Wd])
			w.mu.Unlock()
			for _, lw := range waiting {
				w.check(lw, true, ev.Mask&unix.IN_IGNORED != 0)
			}
		}
	}
}

// checkAll settles every waiter whose lock is free.
func (w *lockWatch) checkAll() {
	w.mu.Lock()
	var all []*lockWaiter
	for _, list := range w.waiters {
		all = append(all, list...)
	}
	w.mu.Unlock()
	for _, lw := range all {
		w.check(lw, false, false)
	}
}

// check settles lw when its lock is free. After a close (closed) it settles
// it in any case: the kernel reports a close before it drops the flock the
// close released, so a lock still held then is waited for by a thread,
// briefly. So is one whose watch is gone (unwatched: the file was removed;
// no close will be reported any more).
func (w *lockWatch) check(lw *lockWaiter, closed, unwatched bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.waiters[lw.wd]
	i := slices.Index(list, lw)
	if i < 0 {
		return // settled already: lw.f may be closed
	}
	free := lockFree(lw.f)
	if !free && !closed && !unwatched {
		return
	}
	if list = slices.Delete(list, i, i+1); len(list) > 0 {
		w.waiters[lw.wd] = list
	} else {
		delete(w.waiters, lw.wd)
		if !unwatched && !w.closed {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(lw.wd))
		}
	}
	if free {
		lw.f.Close()
		close(lw.done)
		return
	}
	go func() {
		waitFlock(lw.f)
		lw.f.Close()
		close(lw.done)
	}()
}

// close stops the watch; the channels not closed yet stay open (the
// runtime has stopped).
func (w *lockWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.ino.Close()
	}
}

// lockFree reports whether nobody holds the flock on f's file.
func lockFree(f *os.File) bool {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return true
	}
	return !errors.Is(err, syscall.EWOULDBLOCK)
}

// waitFlock blocks until nobody holds the flock on f's file.
func waitFlock(f *os.File) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return
		}
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}
