package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// defaultPath is the PATH a container gets when its config sets none (the one
// runc and containerd default to).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// StartContainer starts the container's process under a new shim and returns
// once the process runs. When it cannot start (command not found, bad working
// dir) the container becomes EXITED with exit code 128 and reason StartError,
// as with containerd, and the error says why.
func (r *Runtime) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()

	r.mu.RLock()
	state := c.stateLocked()
	s := r.sandboxes[c.sandboxID]
	ready := s != nil && s.ready
	_, present := r.containers[c.id]
	r.mu.RUnlock()
	switch {
	case !present:
		return nil, errorf(crierr.ErrNotFound, "container %s was removed", c.id)
	case state != runtimeapi.ContainerState_CONTAINER_CREATED:
		return nil, errorf(crierr.ErrFailedPrecondition, "container %s is in %s state", c.id, state)
	case !ready:
		return nil, errorf(crierr.ErrFailedPrecondition, "sandbox %s of container %s is not ready", c.sandboxID, c.id)
	}

	spec, err := r.buildSpec(c, s)
	if err == nil {
		err = atomicfile.ReplaceJSON(filepath.Join(c.dir, "spec.json"), spec)
	}
	var st *shim.State
	if err == nil {
		st, err = r.startInShim(ctx, c, s)
	}
	if err != nil {
		r.recordStartFailure(c, err)
		return nil, fmt.Errorf("failed to start container %s: %v", c.id, err)
	}
	r.mu.Lock()
	c.shim = st
	c.exited = make(chan struct{})
	r.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	r.mu.Unlock()
	// Watched only now, so that STOPPED cannot overtake STARTED.
	r.watch(c)
	r.log.Info().Str("container", c.id).Int("pid", st.PID).Int("shim_pid", st.ShimPID).Msg("container started")
	return &runtimeapi.StartContainerResponse{}, nil
}

// recordStartFailure makes c EXITED with the StartError the shim recorded, or
// with cause when the shim recorded none.
func (r *Runtime) recordStartFailure(c *container, cause error) {
	var ex shim.Exit
	if err := atomicfile.ReadJSON(filepath.Join(c.dir, "exit.json"), &ex); err != nil {
		ex = shim.Exit{ExitCode: shim.StartErrorCode, FinishedAt: nowNano(), Reason: shim.ReasonStartError, Message: cause.Error()}
		if err := atomicfile.WriteJSON(filepath.Join(c.dir, "exit.json"), &ex); err != nil {
			r.log.Error().Err(err).Str("container", c.id).Msg("record start failure")
		}
	}
	ch := make(chan struct{})
	close(ch)
	r.mu.Lock()
	c.exited = ch
	report := r.recordExitLocked(c, &ex)
	r.mu.Unlock()
	if report {
		r.markReported(c.id)
	}
	r.log.Warn().Err(cause).Str("container", c.id).Msg("container failed to start")
}

// buildSpec turns c's config into what the shim runs: argv, environment,
// working dir, log path, user, cgroups and, when the runtime is root, the
// container's own mount namespace (see containerIsolation) whose root is its
// image. Without root the command runs as jetlet's user in the host's view,
// its volumes linked under a directory of its own ($JETLET_ROOTFS).
func (r *Runtime) buildSpec(c *container, s *sandbox) (*shim.ContainerSpec, error) {
	cfg := c.config
	spec := &shim.ContainerSpec{
		Args:        append(append([]string{}, cfg.GetCommand()...), cfg.GetArgs()...),
		LogPath:     c.logPath,
		CgroupProcs: r.cgroupProcs(c),
		Seccomp:     c.seccomp,
		Stdin:       cfg.GetStdin(),
		StdinOnce:   cfg.GetStdinOnce(),
		Tty:         cfg.GetTty(),
	}
	hostname := s.config.GetHostname()
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	var imageEnv []string
	spec.WorkDir = cfg.GetWorkingDir()
	if c.images != nil {
		im := c.images.Root.Config
		var err error
		if spec.Args, err = processArgs(cfg, im); err != nil {
			return nil, err
		}
		imageEnv = im.Env
		if spec.WorkDir == "" {
			spec.WorkDir = im.WorkingDir
		}
	}
	env := []string{"HOSTNAME=" + hostname}
	if !hasEnv(imageEnv, "PATH") {
		env = append(env, "PATH="+defaultPath)
	}

	if r.isolated() {
		iso, usr, home, err := r.isolationOf(cfg, s, c.images)
		if err != nil {
			return nil, err
		}
		iso.OwnPIDs = s.config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_CONTAINER
		// As containerd: on cgroup v2 a cgroup namespace, but for a
		// privileged container, which sees the host's tree.
		if r.cgroups.Mode() == cgroups.V2 {
			privileged := cfg.GetLinux().GetSecurityContext().GetPrivileged()
			iso.CgroupNamespace = c.cgroup != nil && !privileged
			iso.HostCgroups = privileged
		}
		iso.Nsenter = r.iso.nsenter
		if c.images != nil {
			iso.Rootfs = r.imageRootfs(c)
		} else {
			iso.HiddenPaths = r.hidden
		}
		spec.Isolation, spec.User = iso, usr
		if !hasEnv(imageEnv, "HOME") {
			env = append(env, "HOME="+home)
		}
		if spec.WorkDir == "" {
			spec.WorkDir = "/"
		}
	} else {
		rootfs := filepath.Join(c.dir, "rootfs")
		env = append(env, "HOME="+rootfs, "JETLET_ROOTFS="+rootfs)
		if err := r.linkMounts(c, rootfs); err != nil {
			return nil, err
		}
		switch wd := spec.WorkDir; {
		case wd == "":
			spec.WorkDir = rootfs
		case dirExists(wd):
		case dirExists(filepath.Join(rootfs, wd)):
			spec.WorkDir = filepath.Join(rootfs, wd)
		default:
			return nil, fmt.Errorf("working dir %q does not exist on this host", wd)
		}
	}
	var own []string
	for _, kv := range cfg.GetEnvs() {
		own = append(own, kv.GetKey()+"="+string(kv.GetValue()))
	}
	spec.Env = dedupEnv(slices.Concat(env, imageEnv, own)) // the last value of a variable wins
	return spec, nil
}

// linkMounts makes each mount's host_path visible at rootfs/container_path (a
// symlink), creating a missing host_path as a directory as containerd does.
// With LinkMountsOnHost it also links container_path itself on the host when
// that path is free, remembering the links in hostlinks.json for removal.
func (r *Runtime) linkMounts(c *container, rootfs string) error {
	var hostLinks []string
	for _, m := range c.config.GetMounts() {
		host, cpath := m.GetHostPath(), m.GetContainerPath()
		if host == "" || cpath == "" || !filepath.IsAbs(cpath) {
			continue
		}
		if _, err := os.Stat(host); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(host, 0o755); err != nil {
				return fmt.Errorf("create mount source %s: %w", host, err)
			}
		}
		view := filepath.Join(rootfs, cpath)
		if err := os.MkdirAll(filepath.Dir(view), 0o755); err != nil {
			return fmt.Errorf("mount %s: %w", cpath, err)
		}
		_ = os.Remove(view)
		if err := os.Symlink(host, view); err != nil {
			return fmt.Errorf("mount %s: %w", cpath, err)
		}
		if !r.cfg.LinkMountsOnHost {
			continue
		}
		if _, err := os.Lstat(cpath); !errors.Is(err, os.ErrNotExist) {
			r.log.Warn().Str("container", c.id).Str("path", cpath).Msg("mount path exists on the host; not linked there")
			continue
		}
		if err := os.MkdirAll(filepath.Dir(cpath), 0o755); err != nil {
			return fmt.Errorf("mount %s on host: %w", cpath, err)
		}
		if err := os.Symlink(host, cpath); err != nil {
			return fmt.Errorf("mount %s on host: %w", cpath, err)
		}
		hostLinks = append(hostLinks, cpath)
	}
	if len(hostLinks) > 0 {
		return atomicfile.WriteJSON(filepath.Join(c.dir, "hostlinks.json"), hostLinks)
	}
	return nil
}

// dedupEnv keeps the last value of each variable, in first-seen order.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
