package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// initExecPIDEnv, when set, makes the init run its arguments in the
	// running container whose command has this host pid (StartExec).
	initExecPIDEnv = "JETLET_PROC_SHIM_EXEC_PID"
	// initSyncFD is the init's end of the sync socket (ExtraFiles[0]).
	initSyncFD = 3
	// An exec's init reads the container's spec from initSpecFD
	// (ExtraFiles[1]): entered into the container's mount namespace, it may
	// not see the container's directory. initExeFD (ExtraFiles[2]) is the
	// shim binary the init is executed from (sealedExe), itself or by
	// nsenter.
	initSpecFD = 4
	initExeFD  = 5
)

// runInit is the init's side of the protocol on the sync socket:
//
//	init -> parent  pid <host pid>
//	                (the init sets up the container's mount namespace)
//	init -> parent  ready
//	parent -> init  go (once the init is in its cgroups, which the parent
//	                writes while the init starts and mounts)
//	                (user, capabilities, working dir, exec)
//
// Any failure is sent as "error <message>" instead, and the init ends. On
// success the socket closes at the exec (close-on-exec), which the parent
// reads as EOF.
func runInit(dir string, sync *os.File) error {
	syscall.CloseOnExec(int(sync.Fd()))
	err := initContainer(dir, sync)
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	if _, werr := sync.WriteString("error " + msg + "\n"); werr != nil {
		fmt.Fprintf(os.Stderr, "jetlet-init %s: %s\n", dir, msg)
	}
	return err
}

// initContainer sets the container up and executes its command (or the
// exec's); it returns only on failure.
func initContainer(dir string, sync *os.File) error {
	// Until it executes the command (which resets it), the container's
	// processes must not open this process's /proc entries: its exe is the
	// host's shim binary (runc's CVE-2019-5736).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("not dumpable: %w", err)
	}
	execPID := os.Getenv(initExecPIDEnv)
	specFD, exeFD, nsFD, inUserns, err := usernsFDs()
	if err != nil {
		return err
	}
	switch {
	case inUserns:
	case execPID != "":
		specFD, exeFD, nsFD = initSpecFD, initExeFD, -1
	default:
		specFD, exeFD, nsFD = -1, initExeFD, -1
	}
	spec, err := readInitSpec(dir, specFD, exeFD, nsFD)
	if err != nil {
		return err
	}
	args := spec.Args
	if !inUserns {
		// Read while /proc is still the runtime's: the parent may not see host pids.
		self, err := os.Readlink("/proc/self")
		if err != nil {
			return fmt.Errorf("own host pid: %w", err)
		}
		if _, err := sync.WriteString("pid " + self + "\n"); err != nil {
			return err
		}
	}
	switch {
	case inUserns: // mounts made before nsenter
		if err := pivotRootHere(); err != nil {
			return err
		}
	case execPID != "":
		args = os.Args[1:]
		if spec.Isolation != nil && spec.Isolation.Nsenter == "" {
			// This process shares the pod's other namespaces already; only
			// the container's mount view is missing, and without nsenter
			// its root is the nearest thing (see Isolation.Nsenter).
			if spec.Isolation.CgroupNamespace {
				if err := joinCgroupNamespace(execPID); err != nil {
					return err
				}
			}
			if err := unix.Chroot("/proc/" + execPID + "/root"); err != nil {
				return fmt.Errorf("enter the container's root: %w", err)
			}
		}
	case spec.Isolation != nil && spec.Isolation.UserNamespace != nil:
		u, err := openPodUserns(spec.Isolation.UserNamespace)
		if err != nil {
			return err
		}
		h, err := openUsernsHandoff(dir, spec.Isolation.Nsenter, u)
		if err != nil {
			return err
		}
		if err := setUpMountNamespace(dir, spec.Isolation, spec.CgroupProcs, u); err != nil {
			return err
		}
		return enterUserNamespace(h, sync)
	case spec.Isolation != nil:
		if err := setUpMountNamespace(dir, spec.Isolation, spec.CgroupProcs, nil); err != nil {
			return err
		}
	}
	if len(args) == 0 {
		return errors.New("no command")
	}

	if _, err := sync.WriteString("ready\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(sync).ReadString('\n')
	if err != nil || line != "go\n" {
		return fmt.Errorf("waiting for the parent: got %q, %v", line, err)
	}
	if spec.Isolation != nil && spec.Isolation.CgroupNamespace && execPID == "" {
		// Now that the parent has put this process in its cgroups.
		if err := unshareCgroupNamespace(); err != nil {
			return err
		}
	}
	return execCommand(spec, args)
}

// readInitSpec reads the container's spec: from specFD when it is not -1
// (an exec's, entered into the container's mount namespace, may not see
// dir; nor may an init that entered the pod's user namespace), else from
// dir. It closes the descriptors the init was given (exeFD, nsFD; -1: none)
// so that its command inherits none: the shim binary least of all, since a
// process that can open it can rewrite the host's binary.
func readInitSpec(dir string, specFD, exeFD, nsFD int) (*ContainerSpec, error) {
	var data []byte
	var err error
	if specFD >= 0 {
		data, err = readSpecFrom(specFD)
	} else {
		data, err = os.ReadFile(filepath.Join(dir, "spec.json"))
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/spec.json: %w", dir, err)
	}
	var spec ContainerSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("read %s/spec.json: %w", dir, err)
	}
	if exeFD >= 0 {
		if err := unix.Close(exeFD); err != nil {
			return nil, fmt.Errorf("close the shim binary: %w", err)
		}
	}
	if nsFD >= 0 {
		if err := unix.Close(nsFD); err != nil {
			return nil, fmt.Errorf("close the pod's user namespace: %w", err)
		}
	}
	return &spec, nil
}

// execCommand enters the working dir, switches to the container's user and
// capabilities, installs its seccomp filter and executes args; it returns
// only on failure. Credentials, capabilities and the filter are per thread:
// they are set on this locked thread, the one that executes.
func execCommand(spec *ContainerSpec, args []string) error {
	if err := closeOnExec(); err != nil {
		return err
	}
	wd := spec.WorkDir
	if wd == "" {
		wd = "/"
	}
	if err := enterWorkDir(wd); err != nil {
		return err
	}
	path, err := lookPath(args[0], spec.Env)
	if err != nil {
		return err
	}
	runtime.LockOSThread() // never unlocked: the thread becomes the command or the process ends
	// As runc: a filter goes on while the init still holds CAP_SYS_ADMIN,
	// before the user and capabilities change, unless no_new_privs is asked
	// for; then (and without isolation, where the init has no CAP_SYS_ADMIN
	// to install one with) it is the last step before execve, under
	// no_new_privs as the kernel requires of a process without CAP_SYS_ADMIN.
	early := spec.Seccomp != nil && spec.Isolation != nil && !spec.Isolation.NoNewPrivs
	if early {
		if err := spec.Seccomp.install(); err != nil {
			return err
		}
	}
	if err := setCredentials(spec.User, spec.Isolation); err != nil {
		return err
	}
	if spec.Seccomp != nil && !early {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
		if err := spec.Seccomp.install(); err != nil {
			return err
		}
	}
	// The pod shim ignores SIGHUP and SIGINT, and an ignored signal stays
	// ignored across execve; a caught one is reset to its default. Caught
	// here, they reach the command as they reach runc's: Ctrl-C at its
	// terminal interrupts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT)
	err = unix.Exec(path, args, spec.Env)
	return fmt.Errorf("exec %s: %w", path, err)
}

// closeOnExec marks every descriptor above stderr close-on-exec: the
// command inherits no file of the runtime's, whatever leaked into the init
// (runc's CVE-2024-21626). The sync socket stays open until the execve.
func closeOnExec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if !errors.Is(err, unix.ENOSYS) { // Linux before 5.11: each one
		return err
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, fd := range fds {
		if n, err := strconv.Atoi(fd.Name()); err == nil && n > 2 {
			syscall.CloseOnExec(n) // the directory's own, closed since, fails harmlessly
		}
	}
	return nil
}

// enterWorkDir makes dir the working dir and checks that it lies in the
// container's root: a descriptor of the host's that the init still holds
// must not be a way out ("/proc/self/fd/7", runc's CVE-2024-21626), and
// the kernel names a directory outside the root "(unreachable)...".
func enterWorkDir(dir string) error {
	if err := os.Chdir(dir); err != nil {
		return err
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Getcwd(buf)
	if err != nil {
		return fmt.Errorf("working dir %s: %w", dir, err)
	}
	if cwd := string(buf[:n]); !strings.HasPrefix(cwd, "/") {
		return fmt.Errorf("working dir %s is outside the container's root", dir)
	}
	return nil
}

// lookPath resolves name against the PATH of env, as a shell would in the
// container.
func lookPath(name string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if err := os.Setenv("PATH", path); err != nil {
		return "", err
	}
	p, err := exec.LookPath(name)
	if errors.Is(err, exec.ErrDot) {
		err = nil
	}
	return p, err
}

// setCredentials switches the calling thread, locked to this goroutine, to
// user (nil keeps root) and to the capabilities and no_new_privs of iso (nil
// keeps them all).
func setCredentials(user *User, iso *Isolation) error {
	var caps *capabilities
	if iso != nil {
		var err error
		if caps, err = parseCapabilities(iso.Capabilities); err != nil {
			return err
		}
		if err := caps.dropBounding(); err != nil {
			return err
		}
	}
	if user != nil {
		// Keep the permitted set across the change of uid, so that a
		// non-root user can keep the capabilities it asked for.
		if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("keep capabilities: %w", err)
		}
		groups := make([]int, len(user.Groups))
		for i, g := range user.Groups {
			groups[i] = int(g)
		}
		if err := unix.Setgroups(groups); err != nil {
			return fmt.Errorf("setgroups %v: %w", user.Groups, err)
		}
		// The calling thread's ids only, as setgroups and capset above and
		// below: it executes the command, and execve ends the others.
		// syscall.Setresuid would stop the world to signal every thread
		// of the init, a fifth of its CPU at a start of many pods.
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(user.GID), uintptr(user.GID), uintptr(user.GID)); errno != 0 {
			return fmt.Errorf("setgid %d: %w", user.GID, errno)
		}
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(user.UID), uintptr(user.UID), uintptr(user.UID)); errno != 0 {
			return fmt.Errorf("setuid %d: %w", user.UID, errno)
		}
		if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("keep capabilities: %w", err)
		}
	}
	if iso == nil {
		return nil
	}
	if err := caps.apply(); err != nil {
		return err
	}
	if iso.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	return nil
}
