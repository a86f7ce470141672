package embedded

import (
	"context"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// CreateContainer records the container's config in its directory, with
// what it takes from its image (and its image volumes' images), which stay
// held until it is removed. The image must have been pulled (as with
// containerd). A runtime of host programs needs a command: it has no image
// whose entrypoint it could run.
func (r *Runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, errorf(crierr.ErrInvalidArgument, "container config must have metadata with a name")
	}
	if r.store == nil && len(cfg.GetCommand()) == 0 {
		return nil, errorf(crierr.ErrInvalidArgument, "container %q has no command: jetlet-proc runs host processes and cannot know the entrypoint of image %q; set command (and args)",
			md.GetName(), cfg.GetImage().GetImage())
	}
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	ready := s.ready
	r.mu.RUnlock()
	if !ready {
		return nil, errorf(crierr.ErrFailedPrecondition, "sandbox %s is not ready", s.id)
	}
	id := newID()
	var held *containerImages
	var imageID string
	if r.store != nil {
		if held, err = r.holdImages(id, cfg); err != nil {
			return nil, errorf(crierr.ErrNotFound, "container %q: %v", md.GetName(), err)
		}
		imageID = held.Root.ID
	} else {
		r.mu.RLock()
		im := r.lookupImage(cfg.GetImage().GetImage())
		r.mu.RUnlock()
		if im == nil {
			return nil, errorf(crierr.ErrNotFound, "image %q not found: pull it first", cfg.GetImage().GetImage())
		}
		imageID = im.ID
	}
	// A config the start would refuse is refused now, as containerd builds its
	// spec at create.
	iso, err := r.validateContainer(cfg, s, held)
	if err != nil {
		r.releaseImages(id, held)
		return nil, errorf(crierr.ErrInvalidArgument, "container %q: %v", md.GetName(), err)
	}
	// The seccomp profile is read and compiled now, as containerd reads it
	// into the spec at create; the start installs what was compiled.
	var caps *shim.Capabilities
	if r.isolated() {
		caps = &iso.Capabilities
	}
	filter, err := containerSeccomp(cfg, caps)
	if err == nil {
		err = checkAppArmor(cfg.GetLinux().GetSecurityContext())
	}
	if err != nil {
		r.releaseImages(id, held)
		return nil, errorf(crierr.ErrInvalidArgument, "container %q: %v", cfg.GetMetadata().GetName(), err)
	}

	c := &container{
		id:        id,
		sandboxID: s.id,
		name:      containerName(s.config.GetMetadata(), md),
		config:    cfg,
		imageID:   imageID,
		images:    held,
		createdAt: nowNano(),
		resources: cfg.GetLinux().GetResources(),
		seccomp:   filter,
	}
	c.dir = r.containerDir(c.id)
	if lp := cfg.GetLogPath(); lp != "" {
		c.logPath = filepath.Join(s.config.GetLogDirectory(), lp)
	}

	r.mu.Lock()
	err = r.reserveName(c.name, c.id)
	r.mu.Unlock()
	if err != nil {
		r.releaseImages(id, held)
		return nil, err
	}
	fail := func(err error) (*runtimeapi.CreateContainerResponse, error) {
		r.releaseImages(id, held)
		r.mu.Lock()
		delete(r.names, c.name)
		r.mu.Unlock()
		r.deleteCgroup(c.cgroup, "container", c.id)
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "rootfs"), 0o700); err != nil {
		return fail(errorf(crierr.ErrInternal, "create container dir: %v", err))
	}
	if err := r.createContainerCgroup(c, s); err != nil {
		return fail(err)
	}
	if err := r.saveContainer(c); err != nil {
		return fail(errorf(crierr.ErrInternal, "record container: %v", err))
	}
	r.mu.Lock()
	if _, ok := r.sandboxes[s.id]; !ok {
		r.mu.Unlock()
		return fail(errorf(crierr.ErrNotFound, "sandbox %s was removed", s.id))
	}
	r.containers[c.id] = c
	r.containersByPod.add(c.config.GetLabels(), c.id)
	r.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.mu.Unlock()
	r.log.Info().Str("container", c.id).Str("name", c.name).Str("sandbox", s.id).Msg("container created")
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// validateContainer checks what the start would do with cfg: its process
// (an image's entrypoint and cmd), user and isolation. It returns the
// isolation.
func (r *Runtime) validateContainer(cfg *runtimeapi.ContainerConfig, s *sandbox, ci *containerImages) (*shim.Isolation, error) {
	if ci != nil {
		if _, err := processArgs(cfg, ci.Root.Config); err != nil {
			return nil, err
		}
	}
	iso, _, _, err := r.isolationOf(cfg, s, ci)
	return iso, err
}

// isolationOf is containerIsolation for a container of this runtime: users
// and image volumes from its images, or the host's users for host programs.
func (r *Runtime) isolationOf(cfg *runtimeapi.ContainerConfig, s *sandbox, ci *containerImages) (*shim.Isolation, *shim.User, string, error) {
	if ci == nil {
		return containerIsolation(cfg, s.config, s.dir, hostUsers(hostEtc), "", nil)
	}
	return containerIsolation(cfg, s.config, s.dir, r.imageUsers(ci.Root), ci.Root.Config.User, r.imageVolumeLayers(ci))
}
