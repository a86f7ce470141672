package seccomp

import (
	"runtime"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/kernel"
)

// The RuntimeDefault profile is containerd's (v2, contrib/seccomp): the
// Docker-derived allow list, errno EPERM for everything else, and rules
// that depend on the architecture, the kernel and the container's bounding
// capabilities.

// defaultSeccompAllowed are allowed to every container.
var defaultSeccompAllowed = strings.Fields(`
	accept accept4 access adjtimex alarm bind brk cachestat capget capset chdir chmod chown
	chown32 clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime
	clock_gettime64 clock_nanosleep clock_nanosleep_time64 close close_range connect
	copy_file_range creat dup dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old
	epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit
	exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir
	fchmod fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr
	flistxattr flock fork fremovexattr fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64
	fsync ftruncate ftruncate64 futex futex_requeue futex_time64 futex_wait futex_waitv
	futex_wake futimesat getcpu getcwd getdents getdents64 getegid getegid32 geteuid
	geteuid32 getgid getgid32 getgroups getgroups32 getitimer getpeername getpgid getpgrp
	getpid getppid getpriority getrandom getresgid getresgid32 getresuid getresuid32
	getrlimit get_robust_list getrusage getsid getsockname getsockopt get_thread_area gettid
	gettimeofday getuid getuid32 getxattr inotify_add_watch inotify_init inotify_init1
	inotify_rm_watch io_cancel ioctl io_destroy io_getevents io_pgetevents
	io_pgetevents_time64 ioprio_get ioprio_set io_setup io_submit ipc kill landlock_add_rule
	landlock_create_ruleset landlock_restrict_self lchown lchown32 lgetxattr link linkat
	listen listxattr llistxattr _llseek lremovexattr lseek lsetxattr lstat lstat64 madvise
	membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2
	mlockall map_shadow_stack mmap mmap2 mprotect mq_getsetattr mq_notify mq_open
	mq_timedreceive mq_timedreceive_time64 mq_timedsend mq_timedsend_time64 mq_unlink mremap
	msgctl msgget msgrcv msgsnd msync munlock munlockall munmap name_to_handle_at nanosleep
	newfstatat _newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe pipe2
	pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2
	prlimit64 process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read
	readahead readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg
	remap_file_pages removexattr rename renameat renameat2 restart_syscall rmdir rseq
	rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend
	rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr
	sched_getparam sched_get_priority_max sched_get_priority_min sched_getscheduler
	sched_rr_get_interval sched_rr_get_interval_time64 sched_setaffinity sched_setattr
	sched_setparam sched_setscheduler sched_yield seccomp select semctl semget semop
	semtimedop semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid
	setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid
	setpriority setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid
	setreuid32 setrlimit set_robust_list setsid setsockopt set_thread_area set_tid_address
	setuid setuid32 setxattr shmat shmctl shmdt shmget shutdown sigaltstack signalfd
	signalfd4 sigprocmask sigreturn socketcall socketpair splice stat stat64 statfs statfs64
	statx symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create
	timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
	timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times
	tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat utime utimensat
	utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev`)

// defaultSeccompByCapability are allowed to a container whose bounding set
// holds the capability.
var defaultSeccompByCapability = map[string][]string{
	"CAP_DAC_READ_SEARCH": {"open_by_handle_at"},
	"CAP_SYS_ADMIN": strings.Fields(`bpf clone clone3 fanotify_init fsconfig fsmount fsopen fspick
		lookup_dcookie mount mount_setattr move_mount open_tree perf_event_open quotactl
		quotactl_fd setdomainname sethostname setns syslog umount umount2 unshare`),
	"CAP_SYS_BOOT":       {"reboot"},
	"CAP_SYS_CHROOT":     {"chroot"},
	"CAP_SYS_MODULE":     {"delete_module", "init_module", "finit_module"},
	"CAP_SYS_PACCT":      {"acct"},
	"CAP_SYS_PTRACE":     {"kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace"},
	"CAP_SYS_RAWIO":      {"iopl", "ioperm"},
	"CAP_SYS_TIME":       {"settimeofday", "stime", "clock_settime", "clock_settime64"},
	"CAP_SYS_TTY_CONFIG": {"vhangup"},
	"CAP_SYS_NICE":       {"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"},
	"CAP_SYSLOG":         {"syslog"},
	"CAP_BPF":            {"bpf"},
	"CAP_PERFMON":        {"perf_event_open"},
}

// DefaultProfile is containerd's default profile for a container
// with the bounding capabilities bounding.
func DefaultProfile(bounding []string) *specs.LinuxSeccomp {
	allow := func(names ...string) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: names, Action: specs.ActAllow}
	}
	argEquals := func(name string, index uint, value uint64, op specs.LinuxSeccompOperator) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: index, Value: value, Op: op}}}
	}
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Syscalls: []specs.LinuxSyscall{
			allow(defaultSeccompAllowed...),
			argEquals("socket", 0, unix.AF_VSOCK, specs.OpNotEqual),
		},
	}
	for _, persona := range []uint64{0x0, 0x0008, 0x20000, 0x20008, 0xffffffff} {
		p.Syscalls = append(p.Syscalls, argEquals("personality", 0, persona, specs.OpEqualTo))
	}
	if kernel.AtLeast(4, 8) {
		p.Syscalls = append(p.Syscalls, allow("process_vm_readv", "process_vm_writev", "ptrace"))
	}
	switch runtime.GOARCH {
	case "amd64":
		p.Architectures = []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
		p.Syscalls = append(p.Syscalls, allow("arch_prctl", "modify_ldt"))
	case "arm64":
		p.Architectures = []specs.Arch{specs.ArchARM, specs.ArchAARCH64}
		p.Syscalls = append(p.Syscalls, allow("arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls"))
	}
	admin := false
	for _, c := range bounding {
		if names, ok := defaultSeccompByCapability[c]; ok {
			p.Syscalls = append(p.Syscalls, allow(names...))
		}
		admin = admin || c == "CAP_SYS_ADMIN"
	}
	if !admin {
		// clone without new namespaces; clone3, whose flags a filter cannot
		// read, answers ENOSYS so that libcs fall back to clone.
		const newNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
			unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: newNamespaces, ValueTwo: 0, Op: specs.OpMaskedEqual}}})
		nosys := uint(unix.ENOSYS)
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &nosys})
	}
	return p
}
