package seccomp

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// filterVM runs a compiled filter on seccomp_data in x/net/bpf's VM.
type filterVM struct {
	t  *testing.T
	vm *bpf.VM
}

func newFilterVM(t *testing.T, p *specs.LinuxSeccomp) *filterVM {
	t.Helper()
	f, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	var prog []bpf.Instruction
	for b := f.Filter; len(b) > 0; b = b[8:] {
		raw := bpf.RawInstruction{Op: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
		prog = append(prog, raw.Disassemble())
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return &filterVM{t: t, vm: vm}
}

// call is what the filter returns for syscall name of abi with args.
func (f *filterVM) call(abi seccompABI, name string, args ...uint64) uint32 {
	f.t.Helper()
	n, ok := abi.table.SyscallNames[name]
	if !ok {
		f.t.Fatalf("no syscall %s on %s", name, abi.name)
	}
	nr := uint32(n)
	if abi.x32 {
		nr |= x32SyscallBit
	}
	return f.raw(abi.audit, nr, args...)
}

func (f *filterVM) raw(audit, nr uint32, args ...uint64) uint32 {
	f.t.Helper()
	// The kernel loads seccomp_data's words in host order, the VM in network
	// order: each 32-bit word is laid out big-endian here.
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[seccompDataNr:], nr)
	binary.BigEndian.PutUint32(data[seccompDataArch:], audit)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[seccompDataArgs+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[seccompDataArgs+8*i+4:], uint32(a>>32))
	}
	ret, err := f.vm.Run(data)
	if err != nil {
		f.t.Fatal(err)
	}
	return uint32(ret)
}

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retKill   = unix.SECCOMP_RET_KILL_THREAD
)

func native(t *testing.T) seccompABI {
	abis := hostABIs()
	if len(abis) == 0 {
		t.Skipf("no seccomp on %s", runtime.GOARCH)
	}
	return abis[0]
}

func TestSeccompLocalhostStyleProfile(t *testing.T) {
	abi := native(t)
	// critest's profile: allow all but chmod.
	f := newFilterVM(t, &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Syscalls:      []specs.LinuxSyscall{{Names: []string{"chmod", "fchmodat", "no_such_call"}, Action: specs.ActErrno}},
	})
	if got := f.call(abi, "fchmodat"); got != retEPERM {
		t.Errorf("fchmodat: %#x, want EPERM", got)
	}
	if got := f.call(abi, "read"); got != retAllow {
		t.Errorf("read: %#x, want allow", got)
	}
	if got := f.raw(abi.audit, 4000); got != retAllow {
		t.Errorf("an unknown syscall under an allowing default: %#x, want allow (no ENOSYS patch)", got)
	}
	if got := f.raw(unix.AUDIT_ARCH_PPC64LE, 1); got != retKill {
		t.Errorf("an ABI not filtered: %#x, want the thread killed", got)
	}
	if runtime.GOARCH == "amd64" {
		// Without architectures: the native one only, as libseccomp.
		if got := f.call(abiX32, "read"); got != retKill {
			t.Errorf("x32 read: %#x, want killed", got)
		}
		if got := f.call(abiI386, "read"); got != retKill {
			t.Errorf("i386 read: %#x, want killed", got)
		}
	}
}

func TestSeccompDefaultProfile(t *testing.T) {
	abi := native(t)
	const sigchld = uint64(unix.SIGCHLD)
	const newns = unix.CLONE_NEWNS | sigchld
	for _, tc := range []struct {
		name string
		caps []string
		call string
		args []uint64
		want uint32
	}{
		{name: "read", call: "read", want: retAllow},
		{name: "fork-like clone", call: "clone", args: []uint64{sigchld}, want: retAllow},
		{name: "clone with a new namespace", call: "clone", args: []uint64{newns}, want: retEPERM},
		{name: "clone with a new namespace in the high word", call: "clone", args: []uint64{unix.CLONE_NEWUSER | 1<<40}, want: retEPERM},
		{name: "clone3 falls back", call: "clone3", want: retENOSYS},
		{name: "unshare", call: "unshare", args: []uint64{unix.CLONE_NEWUTS}, want: retEPERM},
		{name: "sethostname", call: "sethostname", want: retEPERM},
		{name: "mount", call: "mount", want: retEPERM},
		{name: "socket AF_INET", call: "socket", args: []uint64{unix.AF_INET}, want: retAllow},
		{name: "socket AF_VSOCK", call: "socket", args: []uint64{unix.AF_VSOCK}, want: retEPERM},
		{name: "personality PER_LINUX32", call: "personality", args: []uint64{0x0008}, want: retAllow},
		{name: "personality other", call: "personality", args: []uint64{0x0001}, want: retEPERM},
		{name: "personality query", call: "personality", args: []uint64{0xffffffff}, want: retAllow},
		{name: "ptrace (kernel 4.8+)", call: "ptrace", want: retAllow},
		{name: "reboot", call: "reboot", want: retEPERM},
		{name: "CAP_SYS_ADMIN: clone with a namespace", caps: []string{"CAP_SYS_ADMIN"}, call: "clone", args: []uint64{newns}, want: retAllow},
		{name: "CAP_SYS_ADMIN: clone3", caps: []string{"CAP_SYS_ADMIN"}, call: "clone3", want: retAllow},
		{name: "CAP_SYS_ADMIN: sethostname", caps: []string{"CAP_SYS_ADMIN"}, call: "sethostname", want: retAllow},
		{name: "CAP_SYS_BOOT: reboot", caps: []string{"CAP_SYS_BOOT"}, call: "reboot", want: retAllow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFilterVM(t, DefaultProfile(tc.caps))
			if got := f.call(abi, tc.call, tc.args...); got != tc.want {
				t.Errorf("%s%v: %#x, want %#x", tc.call, tc.args, got, tc.want)
			}
		})
	}
	t.Run("a syscall newer than the profile gets ENOSYS", func(t *testing.T) {
		f := newFilterVM(t, DefaultProfile(nil))
		if got := f.raw(abi.audit, 3000); got != retENOSYS {
			t.Errorf("%#x, want ENOSYS", got)
		}
	})
	if runtime.GOARCH == "amd64" {
		t.Run("the 32-bit ABIs are filtered too", func(t *testing.T) {
			f := newFilterVM(t, DefaultProfile(nil))
			for _, abi := range []seccompABI{abiI386, abiX32} {
				if got := f.call(abi, "read"); got != retAllow {
					t.Errorf("%s read: %#x, want allow", abi.name, got)
				}
				if got := f.call(abi, "sethostname"); got != retEPERM {
					t.Errorf("%s sethostname: %#x, want EPERM", abi.name, got)
				}
			}
		})
	}
}

func TestSeccompArgumentOperators(t *testing.T) {
	abi := native(t)
	values := []uint64{0, 1, 7, 8, 9, 1 << 32, 1<<32 + 8, 8<<32 + 8, 1<<63 | 8, 0xffffffff}
	holds := map[specs.LinuxSeccompOperator]func(arg, v uint64) bool{
		specs.OpEqualTo:      func(a, v uint64) bool { return a == v },
		specs.OpNotEqual:     func(a, v uint64) bool { return a != v },
		specs.OpLessThan:     func(a, v uint64) bool { return a < v },
		specs.OpLessEqual:    func(a, v uint64) bool { return a <= v },
		specs.OpGreaterThan:  func(a, v uint64) bool { return a > v },
		specs.OpGreaterEqual: func(a, v uint64) bool { return a >= v },
		specs.OpMaskedEqual:  func(a, v uint64) bool { return a&v == 8 },
	}
	for op, want := range holds {
		for _, v := range values {
			f := newFilterVM(t, &specs.LinuxSeccomp{
				DefaultAction: specs.ActAllow,
				Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActErrno,
					Args: []specs.LinuxSeccompArg{{Index: 2, Value: v, ValueTwo: 8, Op: op}}}},
			})
			for _, arg := range values {
				got := f.call(abi, "read", 0, 0, arg) == retEPERM
				if got != want(arg, v) {
					t.Errorf("%s: arg %#x value %#x: matched %v", op, arg, v, got)
				}
			}
		}
	}
}

func TestSeccompRuleSemantics(t *testing.T) {
	abi := native(t)
	errno := func(n uint) *uint { return &n }
	t.Run("errnoRet and defaultErrnoRet", func(t *testing.T) {
		f := newFilterVM(t, &specs.LinuxSeccomp{
			DefaultAction: specs.ActErrno, DefaultErrnoRet: errno(uint(unix.EACCES)),
			Syscalls: []specs.LinuxSyscall{
				{Names: []string{"read", "openat2"}, Action: specs.ActAllow}, // openat2: getpid is not newer than the profile
				{Names: []string{"write"}, Action: specs.ActErrno, ErrnoRet: errno(uint(unix.EIO))},
			},
		})
		if got := f.call(abi, "write"); got != unix.SECCOMP_RET_ERRNO|uint32(unix.EIO) {
			t.Errorf("write: %#x, want EIO", got)
		}
		if got := f.call(abi, "getpid"); got != unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES) {
			t.Errorf("getpid: %#x, want EACCES", got)
		}
	})
	t.Run("conditions on one argument are alternatives", func(t *testing.T) {
		f := newFilterVM(t, &specs.LinuxSeccomp{
			DefaultAction: specs.ActAllow,
			Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{
				{Index: 0, Value: 1, Op: specs.OpEqualTo}, {Index: 0, Value: 2, Op: specs.OpEqualTo},
			}}},
		})
		for arg, want := range map[uint64]uint32{1: retEPERM, 2: retEPERM, 3: retAllow} {
			if got := f.call(abi, "read", arg); got != want {
				t.Errorf("read(%d): %#x, want %#x", arg, got, want)
			}
		}
	})
	t.Run("conditions on several arguments must all hold", func(t *testing.T) {
		f := newFilterVM(t, &specs.LinuxSeccomp{
			DefaultAction: specs.ActAllow,
			Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActKillProcess, Args: []specs.LinuxSeccompArg{
				{Index: 0, Value: 1, Op: specs.OpEqualTo}, {Index: 2, Value: 2, Op: specs.OpEqualTo},
			}}},
		})
		if got := f.call(abi, "read", 1, 0, 2); got != unix.SECCOMP_RET_KILL_PROCESS {
			t.Errorf("read(1, 0, 2): %#x, want kill", got)
		}
		if got := f.call(abi, "read", 1, 0, 3); got != retAllow {
			t.Errorf("read(1, 0, 3): %#x, want allow", got)
		}
	})
	t.Run("a rule without conditions wins", func(t *testing.T) {
		f := newFilterVM(t, &specs.LinuxSeccomp{
			DefaultAction: specs.ActErrno,
			Syscalls: []specs.LinuxSyscall{
				{Names: []string{"read"}, Action: specs.ActTrap, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}},
				{Names: []string{"read"}, Action: specs.ActLog},
			},
		})
		if got := f.call(abi, "read", 1); got != unix.SECCOMP_RET_LOG {
			t.Errorf("read(1): %#x, want log", got)
		}
	})
}

func TestSeccompRefusesWhatItCannotHonour(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile specs.LinuxSeccomp
		want    string
	}{
		{"no default action", specs.LinuxSeccomp{}, "defaultAction: no action"},
		{"unknown action", specs.LinuxSeccomp{DefaultAction: "SCMP_ACT_FLY"}, `unknown action "SCMP_ACT_FLY"`},
		{"user notification", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActNotify}}}, "user notification is not supported"},
		{"listener", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, ListenerPath: "/run/l.sock"}, "user notification is not supported"},
		{"unknown architecture", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{"SCMP_ARCH_Z80"}}, `unknown architecture "SCMP_ARCH_Z80"`},
		{"argument index", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{{Names: []string{"read"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 6, Op: specs.OpEqualTo}}}}}, "argument index 6 out of range"},
		{"unknown flag", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Flags: []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_NEW_LISTENER"}}, "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(&tc.profile)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSeccompDefaultProfileFitsTheKernelsLimit(t *testing.T) {
	native(t)
	f, err := Compile(DefaultProfile(shim.AllCapabilities()))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Filter) / 8; n > unix.BPF_MAXINSNS {
		t.Fatalf("%d instructions", n)
	}
	t.Logf("the default profile with every capability: %d instructions", len(f.Filter)/8)
}

// BenchmarkCompileDefaultSeccompProfile is what RuntimeDefault adds to a
// CreateContainer.
func BenchmarkCompileDefaultSeccompProfile(b *testing.B) {
	if len(hostABIs()) == 0 {
		b.Skipf("no seccomp on %s", runtime.GOARCH)
	}
	for b.Loop() {
		if _, err := Compile(DefaultProfile(shim.DefaultCapabilities())); err != nil {
			b.Fatal(err)
		}
	}
}
