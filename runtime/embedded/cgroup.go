package embedded

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

const (
	// cgroupsDir is the runtime's parent cgroup, under its own cgroup.
	cgroupsDir = "jetlet-pods"
	// cgroupDeleteTimeout bounds how long a removal waits for the processes
	// of a cgroup to finish exiting.
	cgroupDeleteTimeout = 2 * time.Second
)

// setupCgroups detects the host's cgroups and makes the runtime's parent
// cgroup; without them (not root, no controllers) pods run unlimited, which
// is said once here. On a v2 host whose init is systemd each pod gets a
// scope of its own instead (cgroups.SetupSystemd): the pods then live
// outside the unit jetlet runs in, which systemd 252 could not start again
// while they ran inside it. Elsewhere a v2 cgroup not delegated to the
// runtime is an error (cgroups.ErrNotDelegated): its pods would fail later.
func (r *Runtime) setupCgroups() error {
	var err error
	if cgroups.Systemd() {
		r.cgroups, err = cgroups.SetupSystemd()
	} else {
		r.cgroups, err = cgroups.Setup(cgroupsDir)
	}
	if err != nil {
		return err
	}
	if ok, why := r.cgroups.Enabled(); !ok {
		r.log.Warn().Str("reason", why).Msg("no cgroups: resource limits are not enforced, OOM kills are not reported and stats are empty")
		return nil
	}
	if scope := r.cgroups.PodScope("<sandbox>"); scope != "" {
		r.log.Info().Stringer("cgroups", r.cgroups.Mode()).Str("pods", scope).Msg("pods and containers get cgroups, each pod in a systemd scope of its own")
		return nil
	}
	r.log.Info().Stringer("cgroups", r.cgroups.Mode()).Msg("pods and containers get cgroups")
	return nil
}

// cgroupsEnabled reports whether pods get cgroups and, when not, why.
func (r *Runtime) cgroupsEnabled() (bool, string) {
	if r.cgroups == nil {
		return false, "the runtime has not started"
	}
	return r.cgroups.Enabled()
}

// podCgroup is where s's pod cgroup goes; nil without cgroups: under the
// sandbox's cgroup_parent, else in its systemd scope on a systemd host
// (cgroups.Hierarchy.PodScope), else under the runtime's parent. It does
// no I/O: the sandbox's record names the cgroup before createPodCgroup
// makes it, so that a crash between the two leaves a record naming a
// cgroup that is not there (removing it is no error), never a cgroup no
// record names.
func (r *Runtime) podCgroup(s *sandbox) *cgroups.Cgroup {
	parent := s.config.GetLinux().GetCgroupParent()
	if parent == "" {
		parent = r.cgroups.PodScope(s.id)
	}
	return r.cgroups.Load(r.cgroups.PodPaths(parent, s.config.GetMetadata().GetUid()))
}

// checkCgroupParent refuses a sandbox's cgroup_parent in the systemd
// driver's form (slice:prefix:name, or a path of .slice units): the
// runtime's driver is cgroupfs (RuntimeConfig), and it makes a parent's
// path itself, which systemd would not know of.
func checkCgroupParent(parent string) error {
	if strings.Contains(parent, ":") || strings.HasSuffix(path.Base(parent), ".slice") {
		return fmt.Errorf("cgroup_parent %q is a systemd slice: this runtime's cgroup driver is cgroupfs (RuntimeConfig), whose parent is a path below the controllers' roots (/kubepods/burstable)", parent)
	}
	return nil
}

// createPodCgroup makes s's pod cgroup, with the pod pids limit and the
// sandbox's resources (LinuxPodSandboxConfig.resources: the pod's cpu and
// memory limits, kubelet's pod cgroup values), once its shim runs: in the
// shim's scope, started first, when the cgroup goes there. A failure is
// logged and the pod runs without one: cgroups never fail a pod.
func (r *Runtime) createPodCgroup(ctx context.Context, s *sandbox) {
	if s.cgroup == nil {
		return
	}
	var err error
	if s.config.GetLinux().GetCgroupParent() == "" && r.cgroups.PodScope(s.id) != "" {
		err = r.cgroups.StartPodScope(ctx, s.id, s.shimPID)
	}
	if err == nil {
		_, err = r.cgroups.Create(s.cgroup.Paths(), s.config.GetLinux().GetResources(), r.cfg.PodPidsLimit, nil)
	}
	if err != nil {
		r.log.Warn().Err(err).Str("sandbox", s.id).Msg("pod runs without a cgroup")
		s.cgroup = nil
	}
}

// createContainerCgroup gives c its cgroup, under its pod's, with its
// resources and its devices: the defaults and those its config asks for, or
// every device when privileged (runc's rules). Resources the host cannot
// apply fail the container.
func (r *Runtime) createContainerCgroup(c *container, s *sandbox) error {
	if s.cgroup == nil {
		return nil
	}
	var devices []cgroups.DeviceRule
	if !c.config.GetLinux().GetSecurityContext().GetPrivileged() {
		_, asked, err := containerDevices(c.config)
		if err != nil {
			return errorf(crierr.ErrInvalidArgument, "%w", err)
		}
		devices = append(slices.Clone(cgroups.DefaultDevices), asked...)
	}
	cg, err := r.cgroups.Create(cgroups.Child(s.cgroup.Paths(), c.id), c.resources, 0, devices)
	if err != nil {
		return cgroupError(err)
	}
	c.cgroup = cg
	return nil
}

func cgroupError(err error) error {
	if errors.Is(err, cgroups.ErrUnsupported) {
		return errorf(crierr.ErrInvalidArgument, "%w", err)
	}
	return errorf(crierr.ErrInternal, "%w", err)
}

// deleteCgroup removes cg, logging a failure (a process escaped the
// container and still runs): removal of the pod or container goes on.
func (r *Runtime) deleteCgroup(cg *cgroups.Cgroup, kind, id string) {
	if cg == nil {
		return
	}
	if err := cg.Delete(cgroupDeleteTimeout); err != nil {
		r.log.Warn().Err(err).Str(kind, id).Msg("cgroup left behind")
	}
}

// podCgroupShared reports whether another sandbox (another attempt of the
// same pod) uses s's pod cgroup.
func (r *Runtime) podCgroupShared(s *sandbox) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, o := range r.sandboxes {
		if o != s && o.cgroup != nil && o.cgroup.String() == s.cgroup.String() {
			return true
		}
	}
	return false
}

// cgroupProcs are the cgroup.procs files c's process is written to before
// its command runs (shim.ContainerSpec.CgroupProcs); none without a cgroup.
func (r *Runtime) cgroupProcs(c *container) []string {
	if c.cgroup == nil {
		return nil
	}
	return c.cgroup.ProcsFiles()
}

// withOOMReason gives ex the reason OOMKilled when the kernel OOM-killed a
// process of c's cgroup (containerd does the same on an OOM event), and
// records it in exit.json so that it survives a restart.
func (r *Runtime) withOOMReason(c *container, ex *shim.Exit) *shim.Exit {
	if ex.Reason != "" || c.cgroup == nil || !c.cgroup.OOMKilled() {
		return ex
	}
	ex.Reason = reasonOOMKilled
	if err := atomicfile.WriteJSON(filepath.Join(c.dir, "exit.json"), ex); err != nil && dirExists(c.dir) {
		r.log.Error().Err(err).Str("container", c.id).Msg("record OOM kill")
	}
	return ex
}

// applyResources applies res to the live cgroup (nil: c has none).
func applyResources(cg *cgroups.Cgroup, res *runtimeapi.LinuxContainerResources) error {
	if cg == nil {
		return nil
	}
	if err := cg.Update(res); err != nil {
		return cgroupError(err)
	}
	return nil
}

const (
	// orphanSweepPeriod is how often the pod cgroups no sandbox names are
	// looked for, besides at Start (kubelet's housekeeping looks every 2 s;
	// orphans come only from a crash or a killed shim's lost record).
	orphanSweepPeriod = time.Minute
	// orphanMinAge spares the pod cgroup another runtime with the same
	// parent (tests on one host) has just made for a pod it starts.
	orphanMinAge = time.Minute
)

// removeOrphanedCgroups removes the pod cgroups under the runtime's parent
// that no sandbox, recovered or being made, names and that hold no process
// (cgroups.Hierarchy.RemoveOrphans): those of pods whose record went (a
// crash before it was written, a state dir removed, a test killed). A
// recovered sandbox keeps its cgroup, whether its shim runs (an adopted pod)
// or died (removed with the sandbox). mu is held throughout, so that no
// sandbox starts making a cgroup the sweep has judged an orphan.
func (r *Runtime) removeOrphanedCgroups() {
	if ok, _ := r.cgroupsEnabled(); !ok {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	keep := map[string]bool{}
	for _, all := range []map[string]*sandbox{r.sandboxes, r.creating} {
		for _, s := range all {
			if s.cgroup != nil {
				keep[path.Base(s.cgroup.String())] = true
			}
		}
	}
	n, err := r.cgroups.RemoveOrphans(func(name string) bool { return keep[name] }, orphanMinAge)
	if err != nil {
		r.log.Warn().Err(err).Msg("orphaned pod cgroups left behind")
	}
	if n > 0 {
		r.log.Info().Int("pod_cgroups", n).Msg("removed orphaned pod cgroups")
	}
}

// sweepOrphanedCgroups runs removeOrphanedCgroups every orphanSweepPeriod
// until Stop.
func (r *Runtime) sweepOrphanedCgroups() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-r.done
		cancel()
	}()
	go periodic.Every(ctx, orphanSweepPeriod, r.removeOrphanedCgroups)
}
