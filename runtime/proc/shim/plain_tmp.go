package shim

// TEMPORARY stand-in for the container init (helper branch "init"), so that the
// pod shim can be tested before it lands; deleted at that merge.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const initSyncFD = 3

type Started struct {
	Cmd     *exec.Cmd
	HostPID int
}

func runInit(dir string, sync *os.File) error { return errors.New("no init yet") }

func StartContainer(exe, dir string, spec *ContainerSpec, stdout, stderr *os.File) (*Started, error) {
	path, err := lookPath(spec.Args[0], spec.Env)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: spec.Args, Env: spec.Env, Dir: spec.WorkDir, Stdout: stdout, Stderr: stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if spec.User != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: spec.User.UID, Gid: spec.User.GID, Groups: spec.User.Groups}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Started{Cmd: cmd, HostPID: hostPIDOf(cmd.Process.Pid)}, nil
}

func StartExec(exe, dir string, spec *ContainerSpec, hostPID int, args []string, stdin, stdout, stderr *os.File) (*exec.Cmd, error) {
	path, err := lookPath(args[0], spec.Env)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: args, Env: spec.Env, Dir: spec.WorkDir, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	return cmd, cmd.Start()
}

func hostPIDOf(nsPID int) int {
	self, _ := selfHostPID()
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", self, self))
	for _, f := range strings.Fields(string(data)) {
		st, _ := os.ReadFile("/proc/" + f + "/status")
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "NSpid:"); ok {
				fs := strings.Fields(v)
				if fs[len(fs)-1] == strconv.Itoa(nsPID) {
					n, _ := strconv.Atoi(f)
					return n
				}
			}
		}
	}
	return nsPID
}

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}
