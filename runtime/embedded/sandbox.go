package embedded

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"google.golang.org/protobuf/encoding/protojson"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
)

// sandboxRecord is sandbox.json.
type sandboxRecord struct {
	ID             string          `json:"id"`
	Config         json.RawMessage `json:"config"`
	RuntimeHandler string          `json:"runtime_handler,omitempty"`
	CreatedAt      int64           `json:"created_at"`
	Ready          bool            `json:"ready"`
	ShimPID        int             `json:"shim_pid,omitempty"`
	Cgroup         cgroups.Paths   `json:"cgroup,omitempty"`
	// NetNS is the sandbox's network namespace while it has one (CNI).
	NetNS string `json:"netns,omitempty"`
	// IPs the CNI network gave the sandbox, IPv4 first; kept after teardown.
	IPs []string `json:"ips,omitempty"`
}

// sandbox is a pod sandbox: a directory, a record and the pod's shim, the
// process whose namespaces the pod's containers share.
type sandbox struct {
	id             string
	name           string // reserved name
	config         *runtimeapi.PodSandboxConfig
	runtimeHandler string
	createdAt      int64
	dir            string
	shimPID        int             // set before the sandbox is published, then read-only
	cgroup         *cgroups.Cgroup // nil: none (cgroups off)

	// ips are the sandbox's CNI addresses; set before it is published.
	ips []string

	// opMu serialises Stop and Remove of this sandbox.
	opMu sync.Mutex

	ready bool // guarded by Runtime.mu
	// netns is the path of the sandbox's own network namespace, empty when it
	// is on the host's network or its network was torn down. Written with
	// opMu and Runtime.mu held (or before publication); read with either.
	netns string
}

func sandboxName(md *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%d", md.GetName(), md.GetNamespace(), md.GetUid(), md.GetAttempt())
}

func (r *Runtime) sandboxDir(id string) string { return filepath.Join(r.sandboxesDir(), id) }

// saveSandbox persists s with the given readiness; the caller holds s.opMu
// or owns s alone.
func (r *Runtime) saveSandbox(s *sandbox, ready bool) error {
	cfg, err := protojson.Marshal(s.config)
	if err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(s.dir, "sandbox.json"), sandboxRecord{
		ID: s.id, Config: cfg, RuntimeHandler: s.runtimeHandler, CreatedAt: s.createdAt, Ready: ready,
		ShimPID: s.shimPID,
		Cgroup:  s.cgroup.Paths(),
		NetNS:   s.netns, IPs: s.ips,
	})
}

func (r *Runtime) loadSandbox(dir string) (*sandbox, error) {
	var rec sandboxRecord
	if err := atomicfile.ReadJSON(filepath.Join(dir, "sandbox.json"), &rec); err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{}
	if err := protojson.Unmarshal(rec.Config, cfg); err != nil {
		return nil, fmt.Errorf("corrupt sandbox config in %s: %w", dir, err)
	}
	if rec.ID != filepath.Base(dir) {
		return nil, fmt.Errorf("sandbox record in %s names id %q", dir, rec.ID)
	}
	return &sandbox{
		id: rec.ID, name: sandboxName(cfg.GetMetadata()), config: cfg,
		runtimeHandler: rec.RuntimeHandler, createdAt: rec.CreatedAt, dir: dir, ready: rec.Ready,
		shimPID: rec.ShimPID,
		cgroup:  r.cgroups.Load(rec.Cgroup),
		netns:   rec.NetNS, ips: rec.IPs,
	}, nil
}

// getSandbox resolves a (possibly truncated) sandbox id.
func (r *Runtime) getSandbox(id string) (*sandbox, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	full, err := resolveID(r.sandboxes, id, "sandbox")
	if err != nil {
		return nil, err
	}
	return r.sandboxes[full], nil
}

// stateLocked derives the CRI state; r.mu must be held.
func (s *sandbox) stateLocked() runtimeapi.PodSandboxState {
	if s.ready {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// containersOf lists the containers of sandbox id; r.mu must not be held.
func (r *Runtime) containersOf(id string) []*container {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*container
	for _, c := range r.containers {
		if c.sandboxID == id {
			out = append(out, c)
		}
	}
	return out
}

func matchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
