package podcgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
)

// cgroupfsRoot is where the v1 hierarchies are mounted.
const cgroupfsRoot = "/sys/fs/cgroup"

// removeTimeout bounds the wait for a pod cgroup's last processes to exit.
const removeTimeout = 2 * time.Second

// cgroupfs makes the cgroups in the cgroup filesystem, through the
// hierarchy code the embedded runtime writes its own with (v1 and v2).
type cgroupfs struct {
	h *cgroups.Hierarchy
}

func newCgroupfs() (*cgroupfs, error) {
	h := cgroups.Root()
	if ok, why := h.Enabled(); !ok {
		return nil, fmt.Errorf("cgroupfs driver: %s", why)
	}
	return &cgroupfs{h: h}, nil
}

func (c *cgroupfs) ensure(_ context.Context, n Name, res Resources) error {
	var pids int64
	if res.PidsLimit != nil {
		pids = *res.PidsLimit
	}
	cri := &runtimeapi.LinuxContainerResources{}
	if res.CPUShares != nil {
		cri.CpuShares = int64(*res.CPUShares)
	}
	if res.CPUQuota != nil {
		cri.CpuQuota = *res.CPUQuota
	}
	if res.CPUPeriod != nil {
		cri.CpuPeriod = int64(*res.CPUPeriod)
	}
	if res.Memory != nil {
		cri.MemoryLimitInBytes = *res.Memory
	}
	_, err := c.h.Create(c.h.PathsOf(n.Cgroupfs()), cri, pids, nil)
	return err
}

// remove removes n from the hierarchies jetlet writes and, on v1, from the
// others, where the runtime's runc made it for its containers' cgroups.
func (c *cgroupfs) remove(_ context.Context, n Name) error {
	if err := c.h.Load(c.h.PathsOf(n.Cgroupfs())).Delete(removeTimeout); err != nil {
		return err
	}
	if c.h.Mode() != cgroups.V1 {
		return nil
	}
	entries, err := os.ReadDir(cgroupfsRoot)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() { // cpu, cpuacct: links to cpu,cpuacct
			continue
		}
		err := os.Remove(filepath.Join(cgroupfsRoot, e.Name(), n.Cgroupfs()))
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			errs = append(errs, fmt.Errorf("delete cgroup %s: %w", n.Cgroupfs(), err))
		}
	}
	return errors.Join(errs...)
}

func (c *cgroupfs) pods(context.Context) ([]Name, error) {
	var out []Name
	for _, level := range []Name{kubepods, burstable, besteffort} {
		entries, err := os.ReadDir(c.h.Dir(c.h.PathsOf(level.Cgroupfs())))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), podPrefix) {
				out = append(out, append(level[:len(level):len(level)], e.Name()))
			}
		}
	}
	return out, nil
}

func (c *cgroupfs) close() {}
