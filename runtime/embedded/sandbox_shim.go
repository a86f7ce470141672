package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/internal/etchosts"
	"github.com/jetlet/jetlet/runtime/embedded/network"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// defaultShmSize is a pod's /dev/shm, as Docker's and containerd's default.
const defaultShmSize = 64 << 20

// podNamespaces are the namespaces of its own s's pod gets (as clone
// flags), as far as this host grants them: UTS, and IPC and PID unless the
// pod shares the host's. The shim stays in the host's mount namespace: each
// container gets its own from there, so a bidirectional volume can still
// reach the host's peers.
func (r *Runtime) podNamespaces(s *sandbox) uintptr {
	ns := s.config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	flags := uintptr(syscall.CLONE_NEWUTS)
	if ns.GetIpc() != runtimeapi.NamespaceMode_NODE {
		flags |= syscall.CLONE_NEWIPC
	}
	if ns.GetPid() != runtimeapi.NamespaceMode_NODE {
		flags |= syscall.CLONE_NEWPID
	}
	return flags & r.iso.allowed
}

// podSpec decides the namespaces s's shim runs in (podNamespaces) and what
// it sets up in them, from the sandbox config. A pid namespace the pod's
// containers share is the pause's, not the shim's (shim.PodSpec.SharedPIDs):
// a container that may ptrace its PID 1 must not find the host's root there.
func (r *Runtime) podSpec(s *sandbox) (uintptr, *shim.PodSpec, error) {
	flags := r.podNamespaces(s)
	spec := &shim.PodSpec{}
	if flags&syscall.CLONE_NEWPID != 0 && s.config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_POD {
		flags &^= syscall.CLONE_NEWPID
		spec.SharedPIDs = true
	}
	if flags&syscall.CLONE_NEWUTS != 0 {
		// As containerd: without one asked for, the pod is named like the host
		// (kubelet always asks, with the pod's name cut to 63 bytes).
		spec.Hostname = s.config.GetHostname()
		if spec.Hostname == "" {
			spec.Hostname, _ = os.Hostname()
		}
	}
	ownIPC := flags&syscall.CLONE_NEWIPC != 0
	for k, v := range s.config.GetLinux().GetSysctls() {
		if err := podScopesSysctl(k, ownIPC, flags&syscall.CLONE_NEWUTS != 0, s.netns != ""); err != nil {
			return 0, nil, err
		}
		if spec.Sysctls == nil {
			spec.Sysctls = map[string]string{}
		}
		spec.Sysctls[k] = v
	}
	return flags, spec, nil
}

// podScopesSysctl admits a sysctl only when the pod's own namespace scopes it
// (runc's rule): kernel.shm*, kernel.msg*, kernel.sem and fs.mqueue.* with an
// IPC namespace, kernel.hostname and kernel.domainname with a UTS namespace,
// net.* with a network namespace (CNI).
func podScopesSysctl(name string, ownIPC, ownUTS, ownNet bool) error {
	switch {
	case strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"),
		name == "kernel.sem", strings.HasPrefix(name, "fs.mqueue."):
		if ownIPC {
			return nil
		}
		return fmt.Errorf("sysctl %q is not allowed: the pod shares the host's IPC namespace", name)
	case name == "kernel.hostname", name == "kernel.domainname":
		if ownUTS {
			return nil
		}
		return fmt.Errorf("sysctl %q is not allowed: the pod shares the host's UTS namespace", name)
	case strings.HasPrefix(name, "net."):
		if ownNet {
			return nil
		}
		return fmt.Errorf("sysctl %q is not allowed: the pod shares the host's network namespace", name)
	}
	return fmt.Errorf("sysctl %q is not allowed: it is not namespaced, so it would change the host", name)
}

// writePodFiles writes what the pod's containers get bound over /etc, as
// containerd writes them: its hostname (the host's when it shares the
// host's UTS namespace); its resolv.conf from the CRI's DNS config, else a
// copy of the host's; its hosts, a copy of the host's on the host's network,
// else localhost's names. It also makes the dir the shim mounts the pod's
// /dev/shm on. They are made anew for each sandbox and used only while it
// runs, which a crash of the host ends: as containerd, they are not synced
// (six fsyncs per pod start otherwise).
func writePodFiles(s *sandbox, spec *shim.PodSpec) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "shm"), 0o700); err != nil {
		return err
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	if err := atomicfile.Replace(filepath.Join(s.dir, "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
		return err
	}
	hosts := []byte(etchosts.Localhost)
	if s.config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		if data, err := os.ReadFile("/etc/hosts"); err == nil {
			hosts = data
		}
	}
	if err := atomicfile.Replace(filepath.Join(s.dir, "hosts"), hosts, 0o644); err != nil {
		return err
	}
	dns := s.config.GetDnsConfig()
	if len(dns.GetServers())+len(dns.GetSearches())+len(dns.GetOptions()) == 0 {
		data, err := os.ReadFile("/etc/resolv.conf")
		if err != nil {
			return nil // a host without one: the image's, if any
		}
		return atomicfile.Replace(filepath.Join(s.dir, "resolv.conf"), data, 0o644)
	}
	var b strings.Builder
	for _, srv := range dns.GetServers() {
		fmt.Fprintf(&b, "nameserver %s\n", srv)
	}
	if len(dns.GetSearches()) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(dns.GetSearches(), " "))
	}
	if len(dns.GetOptions()) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(dns.GetOptions(), " "))
	}
	return atomicfile.Replace(filepath.Join(s.dir, "resolv.conf"), []byte(b.String()), 0o644)
}

// mountPodShm mounts the pod's /dev/shm, a tmpfs its containers bind, as
// containerd mounts a sandbox's on the host. In a user namespace the pod's
// root owns it (uid=, gid=), so that its containers bind it as it is: a
// tmpfs cannot be idmapped before Linux 6.3.
func mountPodShm(s *sandbox) error {
	opts := fmt.Sprintf("mode=1777,size=%d", defaultShmSize)
	userns, err := podUserns(s.config)
	if err != nil {
		return err
	}
	if userns != nil {
		opts += fmt.Sprintf(",uid=%d,gid=%d", userns.GetUids()[0].GetHostId(), userns.GetGids()[0].GetHostId())
	}
	if err := unix.Mount("shm", filepath.Join(s.dir, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount the pod's /dev/shm: %w", err)
	}
	return nil
}

// unmountPodShm unmounts the pod's /dev/shm, if mounted.
func unmountPodShm(s *sandbox) error {
	err := unix.Unmount(filepath.Join(s.dir, "shm"), unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount the pod's /dev/shm: %w", err)
	}
	return nil
}

// startPodShim starts s's shim in its namespaces and waits until it serves.
// It returns the shim's pid.
func (r *Runtime) startPodShim(ctx context.Context, s *sandbox) (int, error) {
	flags, spec, err := r.podSpec(s)
	if err != nil {
		return 0, err
	}
	if err := writePodFiles(s, spec); err != nil {
		return 0, err
	}
	if flags&syscall.CLONE_NEWIPC != 0 {
		if err := mountPodShm(s); err != nil {
			return 0, err
		}
	}
	if err := atomicfile.ReplaceJSON(filepath.Join(s.dir, "pod.json"), spec); err != nil {
		return 0, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	shimLog, err := os.OpenFile(filepath.Join(s.dir, "shim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		pw.Close()
		return 0, err
	}
	cmd := exec.Command(r.cfg.ShimPath)
	cmd.Env = []string{shim.ModeEnv + "=" + shim.ModePod, shim.DirEnv + "=" + s.dir, "PATH=" + defaultPath, shim.OnePEnv}
	cmd.Dir = s.dir
	cmd.Stdout = shimLog // stdin stays /dev/null; nothing ties the shim to us
	cmd.Stderr = shimLog
	cmd.ExtraFiles = []*os.File{pw}
	// A pod in a user namespace has its UTS and IPC namespaces made in it
	// already (createPodUserns): the shim joins them.
	joined, err := podNamespaceFiles(s)
	if err != nil {
		pw.Close()
		shimLog.Close()
		return 0, err
	}
	for _, ns := range joined {
		flags &^= uintptr(ns.Type)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: flags}
	err = network.StartIn(cmd, joined...)
	pw.Close()
	shimLog.Close()
	if err != nil {
		return 0, fmt.Errorf("start pod shim %s: %w", r.cfg.ShimPath, err)
	}
	// Reaped when it ends: once it released its lock when it reported ready
	// (a thread blocked in wait for each pod's life would be a thread per
	// pod, and the pidfd os.Process keeps an open file per pod), else at
	// once (it exits, or was killed). After a restart of the runtime nobody
	// here is its parent, and its lock is how it is watched.
	ended := closedChan
	defer func() {
		pid := cmd.Process.Pid
		_ = cmd.Process.Release()
		go func() {
			<-ended
			for {
				// An unreaped child keeps its pid: no other process has it.
				if _, err := syscall.Wait4(pid, nil, 0, nil); !errors.Is(err, syscall.EINTR) {
					return
				}
			}
		}()
	}()

	deadline := time.Now().Add(r.cfg.StartTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pr.SetReadDeadline(deadline)
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("pod shim (pid %d) gave no report: %w; see %s", cmd.Process.Pid, err, filepath.Join(s.dir, "shim.log"))
	}
	line = strings.TrimSpace(line)
	if msg, failed := strings.CutPrefix(line, "error "); failed {
		return 0, errors.New(msg)
	}
	if _, ok := strings.CutPrefix(line, "ready "); !ok {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("pod shim reported %q", line)
	}
	ended = r.locks.released(filepath.Join(s.dir, "shim.lock"))
	return cmd.Process.Pid, nil
}

// stopPodShim kills s's shim, and with it whatever still runs in the pod, and
// waits until it is gone.
func (r *Runtime) stopPodShim(ctx context.Context, s *sandbox) error {
	lock := filepath.Join(s.dir, "shim.lock")
	if !shimAlive(lock) {
		return nil
	}
	pid := s.shimPID
	if pid <= 0 {
		// The runtime died between starting the shim and recording it.
		pid = shim.ShimPIDFromLock(lock)
	}
	if pid > 0 {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	select {
	case <-r.locks.released(lock):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(killWait):
		return fmt.Errorf("pod shim %s (pid %d) did not exit %v after SIGKILL", s.id, pid, killWait)
	}
}
