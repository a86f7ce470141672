package shim

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A pod that shares one pid namespace among its containers
// (shareProcessNamespace) has it held by a pause, kubelet's pause
// container: its PID 1, which reaps the pod's orphans and does nothing
// else. Not the shim: a container adding CAP_SYS_PTRACE would see the host
// through the shim's /proc/1/root and could ptrace the host's root. The
// pause is the shim binary, run in two stages:
//
//   - modePause, as the host's root in the new pid and mount namespaces:
//     it pivots into an empty read-only tmpfs, the only mount left in its
//     namespace (enterEmptyRoot), sets no_new_privs, empties its bounding
//     set, becomes pauseUID with no capability left, and executes the second
//     stage from the sealed binary (from one thread: no_new_privs and the
//     bounding set are a thread's, and execve keeps only the calling one,
//     whose state every thread of the new image inherits).
//   - modePauseReap: not dumpable, SIGKILLed when the shim's thread that
//     forked it ends (the shim's end), it tells the shim it is ready on the
//     sync socket and, on "go", reaps children until SIGTERM or SIGINT.
//
// The shim stays in the host's pid namespace and starts each container
// and exec in the pause's. A container with CAP_SYS_PTRACE finds an empty
// root, cwd and environment, /dev/null, and a process holding nothing.
const (
	modePause     = "pause"
	modePauseReap = "pause-reap"
	// The pause's files: the sync socket (ExtraFiles[0], kept by the second
	// stage until "go"), its root, and the binary of the second stage.
	pauseSyncFD = 3
	pauseRootFD = 4
	pauseExeFD  = 5
	// pauseUID is the pause's user and group, as kubelet's pause image's.
	pauseUID = 65535
)

// startPause starts the pod's pause. What can fail before the fork fails
// the shim's start; the rest runs while the shim serves, off the pod's
// start: the handshake, after which podPIDNamespace returns the pause's pid
// namespace, and the wait for the pause's end. The shim ends when the pause
// does, or fails to start: the pod's processes were killed with it, as a
// pod whose pause container died.
func (p *podShim) startPause() error {
	var sync *os.File
	pid, exited, err := p.spawn(func() (int, error) {
		cmd, s, err := forkPause(p.exe)
		if err != nil {
			return 0, err
		}
		sync = s
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return fmt.Errorf("start the pod's pause: %w", err)
	}
	p.pauseReady = make(chan struct{})
	go func() {
		pidns, err := pauseHandshake(sync, pid)
		sync.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "jetlet-shim %s: the pod's pause: %v\n", p.dir, err)
			os.Exit(1) // the pause dies with this process
		}
		p.podPIDs = pidns
		close(p.pauseReady)
		ws := <-exited
		fmt.Fprintf(os.Stderr, "jetlet-shim %s: the pod's pause ended (exit code %d): the pod's processes are gone\n", p.dir, exitCode(ws))
		os.Exit(1)
	}()
	return nil
}

// podPIDNamespace is the pid namespace the pod's containers share, once
// the pause holds it; nil when they share none (see PodSpec.SharedPIDs).
func (p *podShim) podPIDNamespace() *os.File {
	if p.pauseReady == nil {
		return nil
	}
	<-p.pauseReady
	return p.podPIDs
}

// forkPause forks the pause's first stage from a thread locked for the rest
// of the shim's life: the parent-death signal the pause sets is sent when
// the thread that forked it ends, not the process. It returns the shim's
// end of the sync socket.
func forkPause(exe string) (*exec.Cmd, *os.File, error) {
	type started struct {
		cmd  *exec.Cmd
		sync *os.File
		err  error
	}
	done := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		cmd, sync, err := startPauseProcess(exe)
		done <- started{cmd, sync, err}
		if err == nil {
			select {} // holds the thread
		}
	}()
	s := <-done
	return s.cmd, s.sync, s.err
}

func startPauseProcess(exe string) (*exec.Cmd, *os.File, error) {
	bin, err := sealedExe(exe)
	if err != nil {
		return nil, nil, fmt.Errorf("the shim binary: %w", err)
	}
	defer bin.Close()
	root, err := emptyRoot()
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("pause sync socket: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "pause-sync")
	child := os.NewFile(uintptr(fds[1]), "pause-sync")
	defer child.Close()
	// Its stdio is /dev/null: nothing of the host's a container could
	// reopen through /proc/1/fd.
	cmd := &exec.Cmd{
		Path:        fmt.Sprintf("/proc/self/fd/%d", pauseExeFD),
		Args:        []string{"pause"},
		Env:         []string{ModeEnv + "=" + modePause, OnePEnv},
		ExtraFiles:  []*os.File{child, root, bin},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS},
	}
	if err := cmd.Start(); err != nil {
		parent.Close()
		return nil, nil, err
	}
	return cmd, parent, nil
}

// emptyRoot is the pause's root: a new tmpfs, read-only and empty, not
// mounted yet (enterEmptyRoot mounts it in the pause's namespace).
func emptyRoot() (*os.File, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("the pause's root: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "0555"); err != nil {
		return nil, fmt.Errorf("the pause's root: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("the pause's root: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC,
		unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("the pause's root: %w", err)
	}
	return os.NewFile(uintptr(mnt), "pause-root"), nil
}

// pauseHandshake is the shim's side of the sync socket: the pause says
// "ready" once it holds its parent-death signal, the shim opens its pid
// namespace and answers "go" (the pause then knows its parent was alive
// after it set the signal).
func pauseHandshake(sync *os.File, pid int) (*os.File, error) {
	line, err := bufio.NewReader(sync).ReadString('\n')
	if err != nil {
		return nil, errors.New("it ended before it was ready")
	}
	if line != "ready\n" {
		return nil, initMsgError(strings.TrimSuffix(line, "\n"))
	}
	// Its pid cannot be another's: it is this process's unreaped child.
	pidns, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return nil, err
	}
	if _, err := sync.WriteString("go\n"); err != nil {
		pidns.Close()
		return nil, err
	}
	return pidns, nil
}

// runPause is modePause, the first stage; it returns only on failure, which
// it reports on the sync socket.
func runPause() error {
	err := dropToPause()
	sync := os.NewFile(pauseSyncFD, "sync")
	_, _ = sync.WriteString("error " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n")
	return err
}

func dropToPause() error {
	runtime.LockOSThread() // never unlocked: this thread executes the second stage
	if err := enterEmptyRoot(); err != nil {
		return err
	}
	if err := unix.Close(pauseRootFD); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	none := &capabilities{}
	if err := none.dropBounding(); err != nil {
		return err
	}
	// Go changes the ids of every thread, which clears their effective,
	// permitted and ambient sets; apply clears this thread's inheritable
	// set, the one the exec keeps.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop groups: %w", err)
	}
	if err := syscall.Setresgid(pauseUID, pauseUID, pauseUID); err != nil {
		return fmt.Errorf("set group %d: %w", pauseUID, err)
	}
	if err := syscall.Setresuid(pauseUID, pauseUID, pauseUID); err != nil {
		return fmt.Errorf("set user %d: %w", pauseUID, err)
	}
	if err := none.apply(); err != nil {
		return err
	}
	// Only the sync socket goes on: not a descriptor the shim or its own
	// parents let leak (a container could reopen it through /proc/1/fd).
	if err := unix.CloseRange(pauseExeFD, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close the descriptors: %w", err)
	}
	argv, err := syscall.SlicePtrFromStrings([]string{"pause"})
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings([]string{ModeEnv + "=" + modePauseReap})
	if err != nil {
		return err
	}
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, pauseExeFD, uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
	return fmt.Errorf("execute the pause: %w", errno)
}

// enterEmptyRoot makes the empty tmpfs (pauseRootFD) this process's root
// and working dir, alone in its mount namespace (a copy of the host's, made
// at its clone): attached, pivoted into, the old root detached, so that a
// container allowed to setns into /proc/1/ns/mnt finds nothing either.
// Where pivot_root is refused (an initramfs root), it is detached again and
// chrooted into: ".." from its root still leads nowhere, but the namespace
// is the host's copy.
func enterEmptyRoot() error {
	// Nothing unmounted here reaches the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := unix.MoveMount(pauseRootFD, "", unix.AT_FDCWD, "/proc", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the empty root: %w", err)
	}
	if err := unix.Fchdir(pauseRootFD); err != nil {
		return fmt.Errorf("enter the empty root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detach the empty root (pivot_root refused): %w", err)
		}
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("chroot into the empty root (pivot_root refused): %w", err)
		}
		return nil
	}
	// The old root is stacked on the new one: detached, it takes every
	// mount of the host's with it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

// runPauseReap is the pause's second stage.
func runPauseReap() error {
	// One P, as its first stage (OnePEnv): set here, not in its
	// environment, which a container with CAP_SYS_PTRACE reads.
	runtime.GOMAXPROCS(1)
	sync := os.NewFile(pauseSyncFD, "sync")
	fail := func(err error) error {
		_, _ = sync.WriteString("error " + err.Error() + "\n")
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("not dumpable: %w", err))
	}
	// Set here: a change of credentials clears it.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fail(fmt.Errorf("parent-death signal: %w", err))
	}
	name, _ := syscall.BytePtrFromString("pause")
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
	children := make(chan os.Signal, 16)
	signal.Notify(children, syscall.SIGCHLD)
	// As kubelet's pause: SIGTERM or SIGINT (from the pod itself: the
	// kernel sends PID 1 no other) ends it, and the pod; what would end a
	// Go program besides is ignored, as the kernel does for a PID 1 that
	// handles none.
	signal.Ignore(syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	if _, err := sync.WriteString("ready\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(sync).ReadString('\n')
	if err != nil || line != "go\n" {
		return errors.New("the shim is gone")
	}
	sync.Close()
	for {
		select {
		case <-stop:
			return nil
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 && !errors.Is(err, syscall.EINTR) {
					break
				}
			}
		}
	}
}
