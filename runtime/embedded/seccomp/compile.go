package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// This file compiles an OCI seccomp profile into the classic BPF program the
// container's init installs, with the semantics runc gives it through
// libseccomp: the host's native ABI is always filtered, plus the profile's
// architectures that can run on this host; a call from any other ABI kills
// the thread (libseccomp's bad-architecture action); unknown syscall names
// are ignored; a syscall numbered above every syscall the profile names gets
// ENOSYS rather than the default action (runc's patch, so that programs fall
// back from syscalls newer than the profile); rules with conditions on the
// same argument twice are alternatives, not a conjunction (as runc adds
// them). Where rules overlap, a rule without conditions wins over rules with
// conditions, and otherwise the first matching rule in the profile's order.

// seccompABI is one syscall ABI a filter can see: its AUDIT_ARCH_ value and
// syscall table. x32 shares x86_64's audit value and marks its syscall
// numbers with __X32_SYSCALL_BIT.
type seccompABI struct {
	name  specs.Arch
	audit uint32
	table *arch.Info
	x32   bool
	// wide: arguments are 64 bits; a 32-bit ABI's are compared on their
	// low word only, as libseccomp does.
	wide bool
}

const x32SyscallBit = 0x40000000

var (
	abiX86_64  = seccompABI{name: specs.ArchX86_64, audit: unix.AUDIT_ARCH_X86_64, table: arch.X86_64, wide: true}
	abiX32     = seccompABI{name: specs.ArchX32, audit: unix.AUDIT_ARCH_X86_64, table: arch.X32, x32: true}
	abiI386    = seccompABI{name: specs.ArchX86, audit: unix.AUDIT_ARCH_I386, table: arch.I386}
	abiAARCH64 = seccompABI{name: specs.ArchAARCH64, audit: unix.AUDIT_ARCH_AARCH64, table: arch.AARCH64, wide: true}
	abiARM     = seccompABI{name: specs.ArchARM, audit: unix.AUDIT_ARCH_ARM, table: arch.ARM}
)

// hostABIs are the ABIs a process on this host can call the kernel with,
// the native one first; nil where jetlet has no syscall tables.
func hostABIs() []seccompABI {
	switch runtime.GOARCH {
	case "amd64":
		return []seccompABI{abiX86_64, abiX32, abiI386}
	case "arm64":
		return []seccompABI{abiAARCH64, abiARM}
	}
	return nil
}

// knownArches are the SCMP_ARCH_ names the runtime spec defines; a profile
// naming another is refused.
var knownArches = []specs.Arch{
	specs.ArchX86, specs.ArchX86_64, specs.ArchX32, specs.ArchARM, specs.ArchAARCH64,
	specs.ArchMIPS, specs.ArchMIPS64, specs.ArchMIPS64N32, specs.ArchMIPSEL, specs.ArchMIPSEL64,
	specs.ArchMIPSEL64N32, specs.ArchPPC, specs.ArchPPC64, specs.ArchPPC64LE, specs.ArchS390,
	specs.ArchS390X, specs.ArchPARISC, specs.ArchPARISC64, specs.ArchRISCV64, specs.ArchLOONGARCH64,
}

// Compile compiles p for this host.
func Compile(p *specs.LinuxSeccomp) (*shim.Seccomp, error) {
	host := hostABIs()
	if len(host) == 0 {
		return nil, fmt.Errorf("seccomp is not supported on %s", runtime.GOARCH)
	}
	if p.ListenerPath != "" {
		return nil, fmt.Errorf("seccomp listenerPath %q: user notification is not supported", p.ListenerPath)
	}
	var flags uint
	for _, f := range p.Flags {
		switch f {
		case specs.LinuxSeccompFlagLog:
			flags |= unix.SECCOMP_FILTER_FLAG_LOG
		case specs.LinuxSeccompFlagSpecAllow:
			flags |= unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW
		case "SECCOMP_FILTER_FLAG_TSYNC":
			// The filter is installed by the one thread that executes.
		default:
			return nil, fmt.Errorf("seccomp flag %q is not supported", f)
		}
	}
	defaultRet, err := seccompRet(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("seccomp defaultAction: %w", err)
	}
	abis := []seccompABI{host[0]}
	for _, a := range p.Architectures {
		if !slices.Contains(knownArches, a) {
			return nil, fmt.Errorf("seccomp: unknown architecture %q", a)
		}
		// An architecture this host cannot run is left out: no call comes from it.
		if i := slices.IndexFunc(host, func(h seccompABI) bool { return h.name == a }); i >= 0 && !slices.ContainsFunc(abis, func(h seccompABI) bool { return h.name == a }) {
			abis = append(abis, host[i])
		}
	}
	rules, err := seccompRules(p.Syscalls)
	if err != nil {
		return nil, err
	}
	// runc's ENOSYS patch applies unless the default already allows or
	// already answers ENOSYS.
	enosys := p.DefaultAction != specs.ActAllow && p.DefaultAction != specs.ActLog &&
		defaultRet != unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)

	var a bpfAsm
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompDataArch)
	// One section per audit value; x86_64 and x32 share one.
	type section struct {
		audit  uint32
		label  int
		native *seccompABI // the ABI without the x32 bit
		x32    *seccompABI // x32, if filtered
	}
	var sections []*section
	for i := range abis {
		abi := &abis[i]
		j := slices.IndexFunc(sections, func(s *section) bool { return s.audit == abi.audit })
		if j < 0 {
			sections = append(sections, &section{audit: abi.audit, label: a.newLabel()})
			j = len(sections) - 1
		}
		if abi.x32 {
			sections[j].x32 = abi
		} else {
			sections[j].native = abi
		}
	}
	// Section starts are far apart: each test skips over a long jump.
	for _, s := range sections {
		a.jumpLong(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, s.audit, s.label)
	}
	a.ret(unix.SECCOMP_RET_KILL_THREAD) // an ABI not filtered
	for _, s := range sections {
		a.mark(s.label)
		a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompDataNr)
		if s.audit != unix.AUDIT_ARCH_X86_64 {
			a.abiBlock(s.native, rules, defaultRet, enosys)
			continue
		}
		const jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		var x32 int
		if s.x32 != nil {
			x32 = a.newLabel()
			a.jumpLong(jset, x32SyscallBit, x32)
		} else {
			native := a.newLabel()
			a.jump(jset, x32SyscallBit, -1, native)
			a.ret(unix.SECCOMP_RET_KILL_THREAD)
			a.mark(native)
		}
		a.abiBlock(s.native, rules, defaultRet, enosys) // x86_64, the native ABI, is always filtered
		if s.x32 != nil {
			a.mark(x32)
			a.abiBlock(s.x32, rules, defaultRet, enosys)
		}
	}
	prog, err := a.assemble()
	if err != nil {
		return nil, err
	}
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp profile compiles to %d BPF instructions, more than the kernel's %d", len(prog), unix.BPF_MAXINSNS)
	}
	return &shim.Seccomp{Filter: encodeFilter(prog), Flags: flags}, nil
}

// Offsets in struct seccomp_data.
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArgs = 16 // args[6], 64 bits each, low word first (little-endian hosts)
)

// seccompRule is one rule of the profile for one syscall name.
type seccompRule struct {
	name  string
	ret   uint32
	conds []specs.LinuxSeccompArg // all must hold; none: the rule always applies
}

// seccompRules flattens the profile's syscall rules into one rule per name
// (and per alternative where an argument is tested twice).
func seccompRules(syscalls []specs.LinuxSyscall) ([]seccompRule, error) {
	var rules []seccompRule
	for _, sc := range syscalls {
		ret, err := seccompRet(sc.Action, sc.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("seccomp rule for %v: %w", sc.Names, err)
		}
		for _, c := range sc.Args {
			if c.Index > 5 {
				return nil, fmt.Errorf("seccomp rule for %v: argument index %d out of range", sc.Names, c.Index)
			}
			if !slices.Contains(seccompOps, c.Op) {
				return nil, fmt.Errorf("seccomp rule for %v: unknown operator %q", sc.Names, c.Op)
			}
		}
		alternatives := [][]specs.LinuxSeccompArg{sc.Args}
		if repeatsIndex(sc.Args) {
			alternatives = nil
			for _, c := range sc.Args {
				alternatives = append(alternatives, []specs.LinuxSeccompArg{c})
			}
		}
		for _, name := range sc.Names {
			for _, conds := range alternatives {
				rules = append(rules, seccompRule{name: name, ret: ret, conds: conds})
			}
		}
	}
	return rules, nil
}

var seccompOps = []specs.LinuxSeccompOperator{
	specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual, specs.OpEqualTo,
	specs.OpGreaterEqual, specs.OpGreaterThan, specs.OpMaskedEqual,
}

func repeatsIndex(args []specs.LinuxSeccompArg) bool {
	seen := map[uint]bool{}
	for _, c := range args {
		if seen[c.Index] {
			return true
		}
		seen[c.Index] = true
	}
	return false
}

// seccompRet is the filter's return value for an action; errno, when set,
// is the errno of SCMP_ACT_ERRNO and the message of SCMP_ACT_TRACE (EPERM
// when unset, as runc).
func seccompRet(act specs.LinuxSeccompAction, errno *uint) (uint32, error) {
	data := uint32(unix.EPERM)
	if errno != nil {
		if *errno > unix.SECCOMP_RET_DATA {
			return 0, fmt.Errorf("errnoRet %d out of range", *errno)
		}
		data = uint32(*errno)
	}
	switch act {
	case specs.ActKill, specs.ActKillThread:
		return unix.SECCOMP_RET_KILL_THREAD, nil
	case specs.ActKillProcess:
		return unix.SECCOMP_RET_KILL_PROCESS, nil
	case specs.ActTrap:
		return unix.SECCOMP_RET_TRAP, nil
	case specs.ActErrno:
		return unix.SECCOMP_RET_ERRNO | data, nil
	case specs.ActTrace:
		return unix.SECCOMP_RET_TRACE | data, nil
	case specs.ActAllow:
		return unix.SECCOMP_RET_ALLOW, nil
	case specs.ActLog:
		return unix.SECCOMP_RET_LOG, nil
	case specs.ActNotify:
		return 0, fmt.Errorf("action %s: user notification is not supported", act)
	case "":
		return 0, fmt.Errorf("no action")
	}
	return 0, fmt.Errorf("unknown action %q", act)
}

// abiBlock emits the rules for one ABI with the syscall number in A: the
// ENOSYS stub, the unconditional rules (grouped by return value), the
// conditional rules, then the default.
func (a *bpfAsm) abiBlock(abi *seccompABI, rules []seccompRule, defaultRet uint32, enosys bool) {
	type numbered struct {
		nr uint32
		seccompRule
	}
	var known []numbered
	var last uint32
	for _, r := range rules {
		n, ok := abi.table.SyscallNames[r.name]
		if !ok {
			continue // not a syscall of this ABI: ignored, as libseccomp and runc do
		}
		nr := uint32(n)
		if abi.x32 {
			nr |= x32SyscallBit
		}
		known = append(known, numbered{nr, r})
		last = max(last, nr)
	}
	if enosys && len(known) > 0 {
		skip := a.newLabel()
		a.jump(unix.BPF_JMP|unix.BPF_JGT|unix.BPF_K, last, -1, skip)
		a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
		a.mark(skip)
	}
	unconditional := map[uint32]bool{}
	var byRet []uint32 // return values in order of first use
	nrs := map[uint32][]uint32{}
	for _, r := range known {
		if len(r.conds) > 0 || unconditional[r.nr] {
			continue
		}
		unconditional[r.nr] = true
		if _, ok := nrs[r.ret]; !ok {
			byRet = append(byRet, r.ret)
		}
		nrs[r.ret] = append(nrs[r.ret], r.nr)
	}
	// Each chunk jumps forward to its own return, so every conditional jump
	// stays within BPF's 255-instruction reach.
	const chunk = 250
	for _, ret := range byRet {
		for list := range slices.Chunk(nrs[ret], chunk) {
			match, after := a.newLabel(), a.newLabel()
			for _, nr := range list {
				a.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, nr, match, -1)
			}
			a.ja(after)
			a.mark(match)
			a.ret(ret)
			a.mark(after)
		}
	}
	for _, r := range known {
		if len(r.conds) == 0 || unconditional[r.nr] {
			continue
		}
		next := a.newLabel()
		a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompDataNr)
		a.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, r.nr, -1, next)
		for _, c := range r.conds {
			a.condition(c, abi.wide, next)
		}
		a.ret(r.ret)
		a.mark(next)
	}
	a.ret(defaultRet)
}

// condition emits a test of one argument that falls through when it holds
// and jumps to fail when it does not.
func (a *bpfAsm) condition(c specs.LinuxSeccompArg, wide bool, fail int) {
	lo := uint32(seccompDataArgs + 8*c.Index)
	hi := lo + 4
	vlo, vhi := uint32(c.Value), uint32(c.Value>>32)
	pass := a.newLabel()
	ld := func(off uint32) { a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
	const (
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgt = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	)
	// The high words decide unless they are equal; then the low words do.
	// ltHi and gtHi are where a lower or higher high word goes.
	compare := func(ltHi, gtHi int, low func()) {
		if wide {
			ld(hi)
			a.jump(jgt, vhi, gtHi, -1)
			a.jump(jeq, vhi, -1, ltHi)
		}
		ld(lo)
		low()
	}
	switch c.Op {
	case specs.OpEqualTo:
		if wide {
			ld(hi)
			a.jump(jeq, vhi, -1, fail)
		}
		ld(lo)
		a.jump(jeq, vlo, -1, fail)
	case specs.OpNotEqual:
		if wide {
			ld(hi)
			a.jump(jeq, vhi, -1, pass)
		}
		ld(lo)
		a.jump(jeq, vlo, fail, -1)
	case specs.OpGreaterThan:
		compare(fail, pass, func() { a.jump(jgt, vlo, -1, fail) })
	case specs.OpGreaterEqual:
		compare(fail, pass, func() { a.jump(jge, vlo, -1, fail) })
	case specs.OpLessThan:
		compare(pass, fail, func() { a.jump(jge, vlo, fail, -1) })
	case specs.OpLessEqual:
		compare(pass, fail, func() { a.jump(jgt, vlo, fail, -1) })
	case specs.OpMaskedEqual:
		// (arg & Value) == ValueTwo
		if wide {
			ld(hi)
			a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, vhi)
			a.jump(jeq, uint32(c.ValueTwo>>32), -1, fail)
		}
		ld(lo)
		a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, vlo)
		a.jump(jeq, uint32(c.ValueTwo), -1, fail)
	}
	a.mark(pass)
}

// bpfAsm assembles a classic BPF program with forward jumps to labels.
type bpfAsm struct {
	prog   []unix.SockFilter
	labels []int // label -> instruction index, -1 until marked
	fixups []bpfFixup
}

// bpfFixup is a jump whose targets are labels (-1: the next instruction).
type bpfFixup struct {
	at     int
	jt, jf int
	long   bool // BPF_JA: jt holds the target
}

func (a *bpfAsm) newLabel() int {
	a.labels = append(a.labels, -1)
	return len(a.labels) - 1
}

func (a *bpfAsm) mark(l int) { a.labels[l] = len(a.prog) }

func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

func (a *bpfAsm) ret(k uint32) { a.stmt(unix.BPF_RET|unix.BPF_K, k) }

// jump emits a conditional jump to jt when the test holds, else to jf.
func (a *bpfAsm) jump(code uint16, k uint32, jt, jf int) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: jt, jf: jf})
	a.stmt(code, k)
}

// jumpLong jumps to l, however far, when the test holds.
func (a *bpfAsm) jumpLong(code uint16, k uint32, l int) {
	skip := a.newLabel()
	a.jump(code, k, -1, skip)
	a.ja(l)
	a.mark(skip)
}

// ja emits an unconditional jump, whose reach is not limited to 255.
func (a *bpfAsm) ja(l int) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: l, long: true})
	a.stmt(unix.BPF_JMP|unix.BPF_JA, 0)
}

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	offset := func(at, l int) (int, error) {
		if l < 0 {
			return 0, nil
		}
		to := a.labels[l]
		if to <= at {
			return 0, fmt.Errorf("bpf: label %d not marked after instruction %d", l, at)
		}
		return to - at - 1, nil
	}
	for _, f := range a.fixups {
		jt, err := offset(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		if f.long {
			a.prog[f.at].K = uint32(jt)
			continue
		}
		jf, err := offset(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		if jt > 255 || jf > 255 {
			return nil, fmt.Errorf("bpf: jump at %d too far (%d, %d)", f.at, jt, jf)
		}
		a.prog[f.at].Jt, a.prog[f.at].Jf = uint8(jt), uint8(jf)
	}
	return a.prog, nil
}

// encodeFilter lays prog out as the kernel's struct sock_filter array, in
// the host's byte order (what the shim hands to seccomp(2)).
func encodeFilter(prog []unix.SockFilter) []byte {
	b := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		b = binary.NativeEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b
}
