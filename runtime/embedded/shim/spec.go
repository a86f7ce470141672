// Package shim is the embedded runtime's per-pod supervisor: one small process
// per pod sandbox, started by the runtime in the pod's namespaces, that starts
// the pod's containers as its children, copies their output to the CRI log
// and records their exits. It is built into its own small binary
// (cmd/jetlet-shim), so it imports nothing but the standard library,
// golang.org/x/sys and the leaves internal/safepath and internal/atomicfile
// (.ci/deprule): no Kubernetes types, no NATS, no gRPC. The runtime
// (package proc) translates CRI requests into the specs below.
package shim

// ContainerSpec is a container directory's spec.json: everything the pod
// shim and the container's init need to run one container.
type ContainerSpec struct {
	Args    []string `json:"args"` // command + args, argv[0] as given
	Env     []string `json:"env"`
	WorkDir string   `json:"work_dir"`
	LogPath string   `json:"log_path,omitempty"`
	// User is who the process runs as; nil keeps the shim's own user.
	User *User `json:"user,omitempty"`
	// CgroupProcs are the cgroup.procs files the shim writes the container's
	// pid to before it executes the command (one per cgroup v1 hierarchy, or
	// the one v2 file).
	CgroupProcs []string `json:"cgroup_procs,omitempty"`
	// Isolation, when set, gives the container a mount namespace of its own
	// set up by its init before the command runs. Nil runs the command in the
	// shim's mount namespace (the runtime is not root).
	Isolation *Isolation `json:"isolation,omitempty"`
	// Stdin gives the command a stdin pipe that the shim keeps open for
	// attached clients (the CRI's stdin); otherwise its stdin is /dev/null.
	// StdinOnce closes it when the first attach with a stdin ends.
	Stdin     bool `json:"stdin,omitempty"`
	StdinOnce bool `json:"stdin_once,omitempty"`
	// Tty gives the command a terminal, kept by the shim, as its stdin,
	// stdout and stderr and controlling terminal: its output is one stream
	// (stdout), and StdinOnce does not close it.
	Tty bool `json:"tty,omitempty"`
	// Seccomp, when set, is installed on the command and on every exec in
	// the container.
	Seccomp *Seccomp `json:"seccomp,omitempty"`
}

// Seccomp is a compiled seccomp filter: the runtime compiles the profile,
// the init only installs it.
type Seccomp struct {
	// Filter is the classic BPF program as the kernel's struct sock_filter
	// array in the host's byte order.
	Filter []byte `json:"filter"`
	// Flags are seccomp(2)'s SECCOMP_FILTER_FLAG_ values.
	Flags uint `json:"flags,omitempty"`
}

// User is a process's credentials.
type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// Isolation is what a container's init applies in the container's own mount
// namespace before it runs the command.
type Isolation struct {
	// Rootfs is the container's root: its image. Nil makes the root the
	// host's tree (a runtime that runs host programs, see HiddenPaths).
	Rootfs *Rootfs `json:"rootfs,omitempty"`
	// Mounts are applied in order after the root is set up.
	Mounts []Mount `json:"mounts,omitempty"`
	// ReadonlyRootfs makes the root and every host tree under it read-only.
	ReadonlyRootfs bool `json:"readonly_rootfs,omitempty"`
	// MaskedPaths are hidden (a file under /dev/null, a directory under an
	// empty read-only tmpfs); ReadonlyPaths are bound read-only onto
	// themselves. Paths that do not exist are skipped.
	MaskedPaths   []string `json:"masked_paths,omitempty"`
	ReadonlyPaths []string `json:"readonly_paths,omitempty"`
	// Capabilities are the process's capability sets by name ("CAP_CHOWN").
	Capabilities Capabilities `json:"capabilities"`
	// Nsenter is the util-linux nsenter binary an exec enters the container's
	// mount namespace with (a Go process cannot: setns refuses a mount
	// namespace to a multi-threaded process). Empty: an exec is chrooted
	// into the container's root instead, so it sees the container's files
	// but not mounts made after the container started, and cannot mount.
	Nsenter string `json:"nsenter,omitempty"`
	// OwnPIDs gives the container a pid namespace of its own inside the pod's
	// (the CRI's NamespaceMode CONTAINER, kubelet's default): its command is
	// its PID 1, and execs join it.
	OwnPIDs bool `json:"own_pids,omitempty"`
	// NoNewPrivs sets PR_SET_NO_NEW_PRIVS (allowPrivilegeEscalation: false).
	NoNewPrivs bool `json:"no_new_privs,omitempty"`
	// WritableSysfs leaves the host's /sys tree writable (a privileged
	// container), its cgroups too; otherwise it is bound read-only.
	WritableSysfs bool `json:"writable_sysfs,omitempty"`
	// CgroupNamespace runs the command in a cgroup namespace of its own,
	// rooted at its cgroup, and its execs in it (cgroup v2, as containerd;
	// see cgroupview.go).
	CgroupNamespace bool `json:"cgroup_namespace,omitempty"`
	// HostCgroups shows the host's whole cgroup tree under /sys/fs/cgroup
	// (a privileged container on cgroup v2, as containerd); otherwise each
	// hierarchy shows the container's own cgroup, or nothing.
	HostCgroups bool `json:"host_cgroups,omitempty"`
	// DeviceNodes lets device nodes made in /dev open (a privileged
	// container, whose devices cgroup allows every device); otherwise /dev
	// is nodev and holds the defaults and Devices only.
	DeviceNodes bool `json:"device_nodes,omitempty"`
	// HiddenPaths are host paths the container must not see in the host's
	// tree that is its root: a directory becomes an empty tmpfs, anything
	// else /dev/null. Paths that do not exist are skipped.
	HiddenPaths []string `json:"hidden_paths,omitempty"`
	// Devices are host devices the container's /dev holds besides the
	// defaults (the runtime allows them in the container's devices cgroup).
	Devices []Device `json:"devices,omitempty"`
	// UserNamespace, when set, runs the command in the pod's user
	// namespace; needs Rootfs (an overlay, not a Copy) and Nsenter.
	UserNamespace *UserNamespace `json:"user_namespace,omitempty"`
}

// UserNamespace is the pod's user namespace (the CRI's UsernsOptions, mode
// POD). The init builds the container's mounts as the host's root, with the
// image's layers and the volumes idmapped to it, then enters it through
// Nsenter and runs the command there.
type UserNamespace struct {
	// Path is the namespace's file, bound in the sandbox dir.
	Path string `json:"path"`
	// UIDs and GIDs are its mappings.
	UIDs []IDMap `json:"uids"`
	GIDs []IDMap `json:"gids"`
}

// IDMap maps Size ids from ContainerID in the namespace to HostID outside.
type IDMap struct {
	ContainerID uint32 `json:"container_id"`
	HostID      uint32 `json:"host_id"`
	Size        uint32 `json:"size"`
}

// Rootfs is a root file system made of an image: its unpacked layers
// stacked under an overlay whose upper and work dirs are the container's own.
type Rootfs struct {
	// Layers are the image's unpacked layer dirs, top layer first (the
	// overlay's lowerdir order).
	Layers []string `json:"layers"`
	// Upper and Work are the overlay's upper and work dirs, on one file
	// system, empty dirs at the container's first start.
	Upper string `json:"upper"`
	Work  string `json:"work"`
	// Copy makes the root a copy of the image in Upper, made at the first
	// start, instead of an overlay: where overlayfs cannot stack the layers
	// (the kernel lacks it, or the state dir's file system cannot be an
	// upper dir). It costs the image's size in each container.
	Copy bool `json:"copy,omitempty"`
}

// Device is a host device node bound into the container.
type Device struct {
	HostPath      string `json:"host_path"`
	ContainerPath string `json:"container_path"`
}

// Mount is one mount in a container's namespace.
type Mount struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Type is "bind" (the default), "tmpfs" (Source ignored) or "image"
	// (an image volume: Layers stacked read-only, Source ignored, SubPath
	// of it mounted).
	Type string `json:"type,omitempty"`
	// Layers are an image volume's unpacked layer dirs, top first.
	Layers []string `json:"layers,omitempty"`
	// SubPath is the path inside an image volume that is mounted; empty:
	// the image's root.
	SubPath  string `json:"sub_path,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// Propagation is "rprivate" (the default), "rslave" (host to container)
	// or "rshared" (bidirectional), as the CRI's MountPropagation asks.
	Propagation string `json:"propagation,omitempty"`
	// PodOwned says the source is already owned by the pod's ids (its
	// /dev/shm, a tmpfs mounted for its root): in a user namespace it is
	// bound as it is, not idmapped, which a tmpfs takes only from Linux 6.3.
	PodOwned bool `json:"pod_owned,omitempty"`
}

// Capabilities are a process's capability sets, by name.
type Capabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Permitted   []string `json:"permitted"`
	Inheritable []string `json:"inheritable,omitempty"`
	Ambient     []string `json:"ambient,omitempty"`
}
