package proc

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/proc/cgroups"
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
}

// shimState is shim.json, written by the shim once the process runs.
type shimState struct {
	ShimPID   int    `json:"shim_pid"`
	PID       int    `json:"pid"`
	StartedAt int64  `json:"started_at"`
	UID       uint32 `json:"uid"`
	GID       uint32 `json:"gid"`
}

// exitState is exit.json, written by the shim when the process has exited (or
// failed to start), or by the runtime when a shim vanished without writing it.
type exitState struct {
	ExitCode   int32  `json:"exit_code"`
	FinishedAt int64  `json:"finished_at"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
}

const (
	reasonCompleted  = "Completed"
	reasonError      = "Error"
	reasonStartError = "StartError" // containerd's reason when the task cannot start
	reasonUnknown    = "Unknown"
	reasonOOMKilled  = "OOMKilled" // the container's cgroup saw an OOM kill
	startErrorCode   = 128         // containerd's exit code for a start failure
	shimLostCode     = 255
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
	cgroup    *cgroups.Cgroup // nil: none (cgroups off)

	// opMu serialises Start, Stop and Remove of this container.
	opMu sync.Mutex

	// guarded by Runtime.mu
	resources *runtimeapi.LinuxContainerResources
	shim      *shimState
	exit      *exitState
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
		CreatedAt: c.createdAt, LogPath: c.logPath, Cgroup: c.cgroup.Paths(),
	}
	r.mu.RLock()
	res := c.resources
	r.mu.RUnlock()
	if res != nil {
		if rec.Resources, err = protojson.Marshal(res); err != nil {
			return err
		}
	}
	return writeJSONAtomic(filepath.Join(c.dir, "container.json"), rec)
}

func (r *Runtime) loadContainer(dir string) (*container, error) {
	var rec containerRecord
	if err := readJSON(filepath.Join(dir, "container.json"), &rec); err != nil {
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
		cgroup: r.cgroups.Load(rec.Cgroup),
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

func exitReason(e *exitState) string {
	if e.Reason != "" {
		return e.Reason
	}
	if e.ExitCode == 0 {
		return reasonCompleted
	}
	return reasonError
}
