package embedded

import (
	"errors"
	"fmt"
	"maps"
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

	// mu guards locks, and orders adding and removing watches.
	mu     sync.Mutex
	locks  map[int32]*watchedLock // by inotify watch descriptor: one per lock file
	closed bool                   // no inotify: stopped (fd may be another file's now), or none to be had
}

// watchedLock is a lock file someone waits for the release of. The kernel
// gives every watch of one file the same descriptor, so its waiters share
// it, and one open of the file.
type watchedLock struct {
	f       *os.File // open read-only while anyone waits
	waiters []chan struct{}
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
	w := &lockWatch{locks: map[int32]*watchedLock{}}
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
		go settle(f, []chan struct{}{done})
		return done
	}
	if l, ok := w.locks[int32(wd)]; ok {
		l.waiters = append(l.waiters, done)
		f.Close() // read-only: its close is not reported
	} else {
		w.locks[int32(wd)] = &watchedLock{f: f, waiters: []chan struct{}{done}}
	}
	w.mu.Unlock()
	// Released before the watch was added: no close will be reported.
	w.check(int32(wd), false, false)
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
			w.check(ev.Wd, true, ev.Mask&unix.IN_IGNORED != 0)
		}
	}
}

// checkAll settles every lock that is free.
func (w *lockWatch) checkAll() {
	w.mu.Lock()
	wds := slices.Collect(maps.Keys(w.locks))
	w.mu.Unlock()
	for _, wd := range wds {
		w.check(wd, false, false)
	}
}

// check settles the lock watched as wd when it is free. After a close
// (closed) it settles it in any case: the kernel reports a close before it
// drops the flock the close released, so a lock still held then is waited
// for by a thread, briefly. So is one whose watch is gone (unwatched: the
// file was removed; no close will be reported any more).
func (w *lockWatch) check(wd int32, closed, unwatched bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.locks[wd]
	if !ok {
		return // settled already, or not ours (a watch being removed)
	}
	free := lockFree(l.f)
	if !free && !closed && !unwatched {
		return
	}
	delete(w.locks, wd)
	if !unwatched && !w.closed {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
	}
	if free {
		l.f.Close()
		for _, done := range l.waiters {
			close(done)
		}
		return
	}
	go settle(l.f, l.waiters)
}

// settle waits, with a thread, until nobody holds the flock on f's file,
// then closes f and tells the waiters.
func settle(f *os.File, waiters []chan struct{}) {
	waitFlock(f)
	f.Close()
	for _, done := range waiters {
		close(done)
	}
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
