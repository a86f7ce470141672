package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/network"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// The pod's user namespace and the UTS and IPC namespaces made in it, bound
// in its sandbox dir.
const (
	usernsFile = "userns"
	utsFile    = "uts"
	ipcFile    = "ipc"
)

// podNamespaceFiles are the namespaces made before s's shim that its
// processes start in: its network's (CNI), and with a user namespace the
// UTS and IPC namespaces made in it.
func podNamespaceFiles(s *sandbox) ([]network.Namespace, error) {
	var out []network.Namespace
	if s.netns != "" {
		out = append(out, network.Namespace{Path: s.netns, Type: unix.CLONE_NEWNET})
	}
	userns, err := podUserns(s.config)
	if err != nil || userns == nil {
		return out, err
	}
	for _, ns := range []network.Namespace{
		{Path: filepath.Join(s.dir, utsFile), Type: unix.CLONE_NEWUTS},
		{Path: filepath.Join(s.dir, ipcFile), Type: unix.CLONE_NEWIPC},
	} {
		if network.IsNamespace(ns.Path) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// podUserns is the user namespace the sandbox config asks for: nil for the
// host's (mode NODE, or no options, as kubelet's NODE default), the mappings
// for a namespace of the pod's own (POD): one for uids and one for gids,
// each from the pod's id 0 (its root must be someone), as containerd takes
// them. The CRI's other modes are refused, as containerd refuses them.
func podUserns(cfg *runtimeapi.PodSandboxConfig) (*runtimeapi.UserNamespace, error) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	switch ns.GetMode() {
	case runtimeapi.NamespaceMode_NODE:
		return nil, nil
	case runtimeapi.NamespaceMode_POD:
		if ns == nil {
			return nil, nil // no options at all: an older kubelet's, the host's
		}
	default:
		return nil, fmt.Errorf("user namespace mode %v is not supported: POD or NODE only", ns.GetMode())
	}
	if len(ns.GetUids()) != 1 || len(ns.GetGids()) != 1 {
		return nil, fmt.Errorf("user namespace mode POD needs one uid and one gid mapping, not %d and %d", len(ns.GetUids()), len(ns.GetGids()))
	}
	for _, m := range []*runtimeapi.IDMapping{ns.GetUids()[0], ns.GetGids()[0]} {
		if m.GetContainerId() != 0 || m.GetLength() == 0 || uint64(m.GetHostId())+uint64(m.GetLength()) > 1<<32 {
			return nil, fmt.Errorf("user namespace mapping %d:%d:%d: want ids from 0 in the pod to ids of the host", m.GetContainerId(), m.GetHostId(), m.GetLength())
		}
	}
	return ns, nil
}

// containerUserns is the shim's view of the pod's user namespace for a
// container of the pod whose sandbox dir is sandboxDir; nil when the pod has
// none. The container must ask for the pod's namespace, as containerd
// requires.
func containerUserns(cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig, sandboxDir string) (*shim.UserNamespace, error) {
	pod, err := podUserns(sb)
	if err != nil {
		return nil, err
	}
	own := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	if pod == nil {
		if own.GetMode() == runtimeapi.NamespaceMode_POD && len(own.GetUids()) > 0 {
			return nil, errors.New("the container asks for a user namespace its sandbox does not have")
		}
		return nil, nil
	}
	if !proto.Equal(own, pod) {
		return nil, errors.New("the container's user namespace options differ from its sandbox's")
	}
	ns := &shim.UserNamespace{Path: filepath.Join(sandboxDir, usernsFile)}
	for _, m := range pod.GetUids() {
		ns.UIDs = append(ns.UIDs, shim.IDMap{ContainerID: m.GetContainerId(), HostID: m.GetHostId(), Size: m.GetLength()})
	}
	for _, m := range pod.GetGids() {
		ns.GIDs = append(ns.GIDs, shim.IDMap{ContainerID: m.GetContainerId(), HostID: m.GetHostId(), Size: m.GetLength()})
	}
	return ns, nil
}

// withUserNamespace makes a user namespace with the mappings, and in it the
// namespaces of flags, and calls use with the pid of a process (the shim
// binary, holding) that keeps them while it runs: the kernel writes a
// namespace's mappings once, for a process in it, and Go writes them for a
// child it starts in a new one.
func withUserNamespace(shimPath string, ns *runtimeapi.UserNamespace, flags uintptr, use func(pid int) error) error {
	idMaps := func(maps []*runtimeapi.IDMapping) []syscall.SysProcIDMap {
		out := make([]syscall.SysProcIDMap, len(maps))
		for i, m := range maps {
			out[i] = syscall.SysProcIDMap{ContainerID: int(m.GetContainerId()), HostID: int(m.GetHostId()), Size: int(m.GetLength())}
		}
		return out
	}
	cmd := exec.Command(shimPath)
	cmd.Env = []string{shim.ModeEnv + "=" + shim.ModeHold}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | flags,
		UidMappings: idMaps(ns.GetUids()), GidMappings: idMaps(ns.GetGids()),
		GidMappingsEnableSetgroups: true, // containers set their groups
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		stdin.Close()
		return fmt.Errorf("create a user namespace: %w", err)
	}
	err = use(cmd.Process.Pid)
	stdin.Close()
	if werr := cmd.Wait(); werr != nil && err == nil {
		err = fmt.Errorf("user namespace holder: %w", werr)
	}
	return err
}

// createPodUserns makes the pod's user namespace and in it the pod's UTS
// and IPC namespaces (those of podNamespaces), bound in its sandbox dir until
// the sandbox stops, and its network namespace when it gets one (CNI): root
// in the pod then holds its capabilities over them (a port below 1024, its
// host name), as containerd makes them. Its PID namespace is the shim's own,
// made by the host's root.
func (r *Runtime) createPodUserns(ctx context.Context, s *sandbox, ns *runtimeapi.UserNamespace) error {
	flags := r.podNamespaces(s) & (syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC)
	ownNet := r.wantsOwnNetwork(s.config)
	if ownNet {
		flags |= syscall.CLONE_NEWNET
	}
	binds := map[string]string{usernsFile: "user"}
	if flags&syscall.CLONE_NEWUTS != 0 {
		binds[utsFile] = "uts"
	}
	if flags&syscall.CLONE_NEWIPC != 0 {
		binds[ipcFile] = "ipc"
	}
	return withUserNamespace(r.cfg.ShimPath, ns, flags, func(pid int) error {
		for file, kind := range binds {
			target := filepath.Join(s.dir, file)
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				return err
			}
			if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), target, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("keep the pod's %s namespace: %w", kind, err)
			}
		}
		if !ownNet {
			return nil
		}
		return r.setUpNetwork(ctx, s, func(dir, id string) (string, error) {
			return network.Adopt(dir, id, fmt.Sprintf("/proc/%d/ns/net", pid))
		})
	})
}

// unmountPodUserns lets the pod's user namespace and those made in it go
// (its network's goes with the network's teardown), if it has one.
func unmountPodUserns(s *sandbox) error {
	for _, file := range []string{utsFile, ipcFile, usernsFile} {
		err := unix.Unmount(filepath.Join(s.dir, file), unix.MNT_DETACH)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("release the pod's %s namespace: %w", file, err)
		}
	}
	return nil
}

// usernsUsable says why pods cannot have user namespaces here, nil when
// they can: containers with their own mount namespaces and overlay roots
// (images, not host programs), nsenter to enter the namespace with, and
// idmapped mounts on the state dir's file system (Linux 5.19 for the
// overlay's layers, 6.3 for tmpfs volumes, as containerd 2 needs).
func (r *Runtime) usernsUsable() error {
	switch {
	case !r.isolated():
		return errors.New("containers have no mount namespaces of their own (not root)")
	case r.cfg.HostPrograms:
		return errors.New("containers run host programs, not images")
	case r.copyRoots:
		return errors.New("overlayfs cannot stack images in the state dir")
	case r.iso.nsenter == "":
		return errors.New("nsenter (util-linux) not found")
	}
	probe := &runtimeapi.UserNamespace{
		Uids: []*runtimeapi.IDMapping{{HostId: 1 << 16, Length: 1 << 16}},
		Gids: []*runtimeapi.IDMapping{{HostId: 1 << 16, Length: 1 << 16}},
	}
	return withUserNamespace(r.cfg.ShimPath, probe, 0, func(pid int) error {
		ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ns)
		tree, err := unix.OpenTree(unix.AT_FDCWD, r.cfg.Dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("no idmapped mounts: %w", err)
		}
		defer unix.Close(tree)
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return fmt.Errorf("no idmapped mounts on %s: %w", r.cfg.Dir, err)
		}
		return nil
	})
}
