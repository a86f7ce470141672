package embedded

import (
	"context"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// CreateContainer records the container's config in its directory. The config
// must carry a command: an image's entrypoint cannot be known without
// unpacking the image, which jetlet-proc never does. The image must have been
// pulled (as with containerd).
func (r *Runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must have metadata with a name")
	}
	if len(cfg.GetCommand()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument,
			"container %q has no command: jetlet-proc runs host processes and cannot know the entrypoint of image %q; set command (and args)",
			md.GetName(), cfg.GetImage().GetImage())
	}
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	ready := s.ready
	im := r.lookupImage(cfg.GetImage().GetImage())
	r.mu.RUnlock()
	if !ready {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready", s.id)
	}
	if im == nil {
		return nil, status.Errorf(codes.NotFound, "image %q not found: pull it first", cfg.GetImage().GetImage())
	}
	// A config the start would refuse is refused now, as containerd builds its
	// spec at create.
	iso, _, err := containerIsolation(cfg, s.config, s.dir)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "container %q: %v", cfg.GetMetadata().GetName(), err)
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
		return nil, status.Errorf(codes.InvalidArgument, "container %q: %v", cfg.GetMetadata().GetName(), err)
	}

	c := &container{
		id:        newID(),
		sandboxID: s.id,
		name:      containerName(s.config.GetMetadata(), md),
		config:    cfg,
		imageID:   im.ID,
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
		return nil, err
	}
	fail := func(err error) (*runtimeapi.CreateContainerResponse, error) {
		r.mu.Lock()
		delete(r.names, c.name)
		r.mu.Unlock()
		r.deleteCgroup(c.cgroup, "container", c.id)
		_ = os.RemoveAll(c.dir)
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "rootfs"), 0o755); err != nil {
		return fail(status.Errorf(codes.Internal, "create container dir: %v", err))
	}
	if err := r.createContainerCgroup(c, s); err != nil {
		return fail(err)
	}
	if err := r.saveContainer(c); err != nil {
		return fail(status.Errorf(codes.Internal, "record container: %v", err))
	}
	r.mu.Lock()
	if _, ok := r.sandboxes[s.id]; !ok {
		r.mu.Unlock()
		return fail(status.Errorf(codes.NotFound, "sandbox %s was removed", s.id))
	}
	r.containers[c.id] = c
	r.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.mu.Unlock()
	r.log.Info().Str("container", c.id).Str("name", c.name).Str("sandbox", s.id).Msg("container created")
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}
