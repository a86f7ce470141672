package embedded

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/shim"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
)

// containerRecord is container.json, written once by CreateContainer and again
// when resources are updated.
type containerRecord struct {
	ID        string          `json:"id"`
	SandboxID string          `json:"sandbox_id"`
	Config    json.RawMessage `json:"config"`
	ImageID   string          `json:"image_id"`
	CreatedAt int64           `json:"created_at"`
	LogPath   string          `json:"log_path,omitempty"`
	Resources json.RawMessage `json:"resources,omitempty"`
	Cgroup    cgroups.Paths   `json:"cgroup,omitempty"`
	Seccomp   *shim.Seccomp   `json:"seccomp,omitempty"`
	// Images: what the container takes from images; nil for host programs.
	Images *containerImages `json:"images,omitempty"`
}

const (
	reasonCompleted = "Completed"
	reasonError     = "Error"
	reasonOOMKilled = "OOMKilled" // the container's cgroup saw an OOM kill
)

type container struct {
	id        string
	sandboxID string
	name      string // reserved name
	config    *runtimeapi.ContainerConfig
	imageID   string
	createdAt int64
	logPath   string
	dir       string
	cgroup    *cgroups.Cgroup  // nil: none (cgroups off)
	seccomp   *shim.Seccomp    // compiled at create, never changed; nil: no filter
	images    *containerImages // held at create, never changed; nil: host programs

	// opMu serialises Start, Stop and Remove of this container.
	opMu sync.Mutex

	// guarded by Runtime.mu
	resources *runtimeapi.LinuxContainerResources
	shim      *shim.State // the running command, as its pod shim recorded it
	exit      *shim.Exit
	exited    chan struct{} // set when the shim runs; closed once exit is known
	// exitAtStart: Start found the shim gone, its exit yet to be collected.
	exitAtStart bool
}

func containerName(sb *runtimeapi.PodSandboxMetadata, md *runtimeapi.ContainerMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%s_%d", md.GetName(), sb.GetName(), sb.GetNamespace(), sb.GetUid(), md.GetAttempt())
}

func (r *Runtime) containerDir(id string) string { return filepath.Join(r.containersDir(), id) }

// stateLocked derives the CRI state; r.mu must be held.
func (c *container) stateLocked() runtimeapi.ContainerState {
	switch {
	case c.exit != nil:
		return runtimeapi.ContainerState_CONTAINER_EXITED
	case c.shim != nil:
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	default:
		return runtimeapi.ContainerState_CONTAINER_CREATED
	}
}

func (r *Runtime) saveContainer(c *container) error {
	cfg, err := protojson.Marshal(c.config)
	if err != nil {
		return err
	}
	rec := containerRecord{
		ID: c.id, SandboxID: c.sandboxID, Config: cfg, ImageID: c.imageID,
		CreatedAt: c.createdAt, LogPath: c.logPath, Cgroup: c.cgroup.Paths(), Seccomp: c.seccomp,
		Images: c.images,
	}
	r.mu.RLock()
	res := c.resources
	r.mu.RUnlock()
	if res != nil {
		if rec.Resources, err = protojson.Marshal(res); err != nil {
			return err
		}
	}
	return atomicfile.WriteJSON(filepath.Join(c.dir, "container.json"), rec)
}

func (r *Runtime) loadContainer(dir string) (*container, error) {
	var rec containerRecord
	if err := atomicfile.ReadJSON(filepath.Join(dir, "container.json"), &rec); err != nil {
		return nil, err
	}
	if rec.ID != filepath.Base(dir) {
		return nil, fmt.Errorf("container record in %s names id %q", dir, rec.ID)
	}
	cfg := &runtimeapi.ContainerConfig{}
	if err := protojson.Unmarshal(rec.Config, cfg); err != nil {
		return nil, fmt.Errorf("corrupt container config in %s: %w", dir, err)
	}
	c := &container{
		id: rec.ID, sandboxID: rec.SandboxID, config: cfg, imageID: rec.ImageID,
		createdAt: rec.CreatedAt, logPath: rec.LogPath, dir: dir,
		cgroup: r.cgroups.Load(rec.Cgroup), seccomp: rec.Seccomp, images: rec.Images,
	}
	if len(rec.Resources) > 0 {
		res := &runtimeapi.LinuxContainerResources{}
		if err := protojson.Unmarshal(rec.Resources, res); err == nil {
			c.resources = res
		}
	}
	return c, nil
}

// getContainer resolves a (possibly truncated) container id.
func (r *Runtime) getContainer(id string) (*container, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	full, err := resolveID(r.containers, id, "container")
	if err != nil {
		return nil, err
	}
	return r.containers[full], nil
}

// runningContainer returns container id and its sandbox, or
// FailedPrecondition when it is not running: what an exec or attach needs.
func (r *Runtime) runningContainer(id string) (*container, *sandbox, error) {
	c, err := r.getContainer(id)
	if err != nil {
		return nil, nil, err
	}
	r.mu.RLock()
	state := c.stateLocked()
	s := r.sandboxes[c.sandboxID]
	r.mu.RUnlock()
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING || s == nil {
		return nil, nil, errorf(crierr.ErrFailedPrecondition, "container %s is in %s state", c.id, state)
	}
	return c, s, nil
}

func exitReason(e *shim.Exit) string {
	if e.Reason != "" {
		return e.Reason
	}
	if e.ExitCode == 0 {
		return reasonCompleted
	}
	return reasonError
}
