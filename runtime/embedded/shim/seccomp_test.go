package shim

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// denySetpriority is a filter that answers setpriority(2) with EPERM and
// allows every other call (of any ABI: a test filter).
func denySetpriority() *Seccomp {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the syscall number
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_SETPRIORITY, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	var b []byte
	for _, ins := range prog {
		b = binary.NativeEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return &Seccomp{Filter: b}
}

// seccompProbe tries setpriority (nice warns and runs true anyway) and shows
// the process's seccomp mode and no_new_privs.
const seccompProbe = "nice -n 1 true; grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status"

const denied = "nice: cannot set niceness: Operation not permitted"

func TestShimSeccompOnCommandAndExec(t *testing.T) {
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities)}
	withFilter := func(s *ContainerSpec) { s.Seccomp = denySetpriority() }
	probe := newContainer(t, iso, withFilter, sh(seccompProbe)...)
	running := newContainer(t, iso, withFilter, sh("echo ready; exec sleep 1000")...)
	res := runTestPod(t, podStep{Dir: probe}, podStep{Dir: running, Keep: true}, podStep{Dir: running, Exec: sh(seccompProbe)})
	// Installed before the capabilities change, as runc does without
	// no_new_privs: the flag stays off.
	wantRun(t, res[0], denied, "Seccomp:\t2", "NoNewPrivs:\t0")
	wantRun(t, res[2], denied, "Seccomp:\t2", "NoNewPrivs:\t0")
}

func TestShimSeccompWithNoNewPrivsAndAUser(t *testing.T) {
	dir := newContainer(t, &Isolation{Capabilities: capsOf(defaultCapabilities), NoNewPrivs: true}, func(s *ContainerSpec) {
		s.User = &User{UID: 1000, GID: 1000}
		s.Seccomp = denySetpriority()
	}, sh(seccompProbe+"; id -u")...)
	res := runTestPod(t, podStep{Dir: dir})
	// Installed last, by a user without CAP_SYS_ADMIN: no_new_privs allows it.
	wantRun(t, res[0], denied, "Seccomp:\t2", "NoNewPrivs:\t1", "1000")
}

// Without isolation the init has no CAP_SYS_ADMIN to count on: the filter
// goes on under no_new_privs.
func TestShimSeccompWithoutIsolation(t *testing.T) {
	dir := newContainer(t, nil, func(s *ContainerSpec) { s.Seccomp = denySetpriority() }, sh(seccompProbe)...)
	_, out := runUnisolated(t, dir)
	wantRun(t, stepResult{Output: out}, denied, "Seccomp:\t2", "NoNewPrivs:\t1")
}

func TestShimRefusesAFilterThatIsNotBPF(t *testing.T) {
	dir := newContainer(t, &Isolation{Capabilities: capsOf(defaultCapabilities)}, func(s *ContainerSpec) {
		s.Seccomp = &Seccomp{Filter: []byte{1, 2, 3}}
	}, "true")
	res := runTestPod(t, podStep{Dir: dir})
	if want := "seccomp: a filter of 3 bytes is not a BPF program"; res[0].StartErr != want {
		t.Errorf("start error %q, want %q", res[0].StartErr, want)
	}
}
