package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
	var netns string
	if s != nil {
		netns = s.netns
	}
	_, present := r.containers[c.id]
	r.mu.RUnlock()
	switch {
	case !present:
		return nil, status.Errorf(codes.NotFound, "container %s was removed", c.id)
	case state != runtimeapi.ContainerState_CONTAINER_CREATED:
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is in %s state", c.id, state)
	case !ready:
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s of container %s is not ready", c.sandboxID, c.id)
	}

	spec, err := r.buildSpec(c, s)
	if err == nil {
		err = writeJSONAtomic(filepath.Join(c.dir, "spec.json"), spec)
	}
	var st *shimState
	if err == nil {
		st, err = r.launchShim(ctx, c, netns)
	}
	if err != nil {
		r.recordStartFailure(c, err)
		return nil, status.Errorf(codes.Unknown, "failed to start container %s: %v", c.id, err)
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
	var ex exitState
	if err := readJSON(filepath.Join(c.dir, "exit.json"), &ex); err != nil {
		ex = exitState{ExitCode: startErrorCode, FinishedAt: nowNano(), Reason: reasonStartError, Message: cause.Error()}
		if err := writeJSONAtomic(filepath.Join(c.dir, "exit.json"), &ex); err != nil {
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
// working dir, log path and user. It also makes the mounts visible.
func (r *Runtime) buildSpec(c *container, s *sandbox) (*shimSpec, error) {
	cfg := c.config
	rootfs := filepath.Join(c.dir, "rootfs")
	spec := &shimSpec{
		Args:    append(append([]string{}, cfg.GetCommand()...), cfg.GetArgs()...),
		LogPath: c.logPath,
	}

	if err := r.setUser(spec, cfg.GetLinux().GetSecurityContext(), rootfs); err != nil {
		return nil, err
	}

	hostname := s.config.GetHostname()
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	env := []string{"PATH=" + defaultPath, "HOSTNAME=" + hostname, "HOME=" + rootfs}
	for _, kv := range cfg.GetEnvs() {
		env = append(env, kv.GetKey()+"="+string(kv.GetValue()))
	}
	env = append(env, "JETLET_ROOTFS="+rootfs)
	spec.Env = dedupEnv(env)

	if err := r.linkMounts(c, rootfs); err != nil {
		return nil, err
	}

	switch wd := cfg.GetWorkingDir(); {
	case wd == "":
		spec.WorkDir = rootfs
	case dirExists(wd):
		spec.WorkDir = wd
	case dirExists(filepath.Join(rootfs, wd)):
		spec.WorkDir = filepath.Join(rootfs, wd)
	default:
		return nil, fmt.Errorf("working dir %q does not exist on this host", wd)
	}
	return spec, nil
}

// setUser runs the process as the configured user when the runtime is root.
// Otherwise the process runs as the runtime's own user and a different
// configured user is ignored (logged).
func (r *Runtime) setUser(spec *shimSpec, sc *runtimeapi.LinuxContainerSecurityContext, rootfs string) error {
	var uid, gid *uint32
	if u := sc.GetRunAsUser(); u != nil {
		v := uint32(u.GetValue())
		uid = &v
	} else if name := sc.GetRunAsUsername(); name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			return fmt.Errorf("user %q: %w", name, err)
		}
		vu, _ := strconv.ParseUint(u.Uid, 10, 32)
		vg, _ := strconv.ParseUint(u.Gid, 10, 32)
		v, g := uint32(vu), uint32(vg)
		uid, gid = &v, &g
	}
	if g := sc.GetRunAsGroup(); g != nil {
		v := uint32(g.GetValue())
		gid = &v
	}
	if uid == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		if int(*uid) != os.Geteuid() {
			r.log.Warn().Uint32("uid", *uid).Msg("not root: run_as_user ignored")
		}
		return nil
	}
	if gid == nil {
		zero := uint32(0)
		gid = &zero
	}
	spec.UID, spec.GID = uid, gid
	for _, g := range sc.GetSupplementalGroups() {
		spec.Groups = append(spec.Groups, uint32(g))
	}
	if err := os.Chown(rootfs, int(*uid), int(*gid)); err != nil {
		return fmt.Errorf("chown rootfs: %w", err)
	}
	return nil
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
		return writeJSONAtomic(filepath.Join(c.dir, "hostlinks.json"), hostLinks)
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
