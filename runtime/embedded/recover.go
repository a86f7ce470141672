package embedded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/runtime/embedded/network"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// recover loads images, sandboxes and containers from Dir. A record that cannot
// be read is logged and skipped. Containers whose shim still runs are adopted;
// the exits of those that ended while the runtime was down are read from what
// their shims recorded.
func (r *Runtime) recover() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadImages()

	for _, dir := range r.recordDirs(r.sandboxesDir()) {
		s, err := r.loadSandbox(dir)
		if errors.Is(err, os.ErrNotExist) {
			r.discardInterruptedCreate(dir, "sandbox")
			continue
		}
		if err != nil {
			r.log.Warn().Err(err).Str("dir", dir).Msg("skipping unreadable sandbox record")
			continue
		}
		if s.ready && s.netns != "" && !network.IsNamespace(s.netns) {
			// Gone with a reboot: the pod's network is lost, so the sandbox
			// is; its stop releases what the CNI network still holds.
			r.log.Warn().Str("sandbox", s.id).Str("netns", s.netns).Msg("sandbox's network namespace is gone: the sandbox is not ready")
			s.ready = false
		}
		r.sandboxes[s.id] = s
		r.sandboxesByPod.add(s.config.GetLabels(), s.id)
		if s.ready {
			r.watchSandbox(s) // settles at once if its shim died meanwhile
		}
		if err := r.reserveName(s.name, s.id); err != nil {
			r.log.Warn().Err(err).Str("sandbox", s.id).Msg("duplicate sandbox name")
		}
	}

	adopted := 0
	for _, dir := range r.recordDirs(r.containersDir()) {
		c, err := r.loadContainer(dir)
		if errors.Is(err, os.ErrNotExist) {
			r.discardInterruptedCreate(dir, "container")
			continue
		}
		if err != nil {
			r.log.Warn().Err(err).Str("dir", dir).Msg("skipping unreadable container record")
			continue
		}
		if s, ok := r.sandboxes[c.sandboxID]; ok {
			c.name = containerName(s.config.GetMetadata(), c.config.GetMetadata())
			if err := r.reserveName(c.name, c.id); err != nil {
				r.log.Warn().Err(err).Str("container", c.id).Msg("duplicate container name")
			}
		}
		r.containers[c.id] = c
		r.containersByPod.add(c.config.GetLabels(), c.id)
		if r.recoverProcess(c) {
			adopted++
		}
	}
	if adopted > 0 {
		r.log.Info().Int("containers", adopted).Msg("adopted running containers")
	}
}

// discardInterruptedCreate removes what a create that a crash interrupted
// before its record was written left: the directory, and for a container
// the cgroup it may have got under its pod's (whose sandbox the record would
// have named: each sandbox's is tried). A sandbox's record is written before
// its cgroup is made. The sandboxes must be loaded.
func (r *Runtime) discardInterruptedCreate(dir, kind string) {
	id := filepath.Base(dir)
	if kind == "container" {
		for _, s := range r.sandboxes {
			if s.cgroup != nil {
				r.deleteCgroup(r.cgroups.Load(cgroups.Child(s.cgroup.Paths(), id)), kind, id)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		r.log.Warn().Err(err).Str(kind, id).Msg("cannot remove what an interrupted create left")
		return
	}
	r.log.Info().Str(kind, id).Msg("removed what an interrupted create left")
}

// recoverProcess fills c's shim and exit state from the shim's files and
// watches it when it still runs; it reports whether it does.
func (r *Runtime) recoverProcess(c *container) bool {
	r.awaitInterruptedStart(c)
	var ex shim.Exit
	switch err := atomicfile.ReadJSON(filepath.Join(c.dir, "exit.json"), &ex); {
	case err == nil:
		c.exit = r.withOOMReason(c, &ex)
	case !errors.Is(err, os.ErrNotExist):
		r.log.Warn().Err(err).Str("container", c.id).Msg("unreadable exit record")
		c.exit = &shim.Exit{ExitCode: shim.LostCode, FinishedAt: time.Now().UnixNano(), Reason: shim.ReasonUnknown, Message: err.Error()}
	}
	var st shim.State
	switch err := atomicfile.ReadJSON(filepath.Join(c.dir, "shim.json"), &st); {
	case err == nil:
		c.shim = &st
	case !errors.Is(err, os.ErrNotExist):
		r.log.Warn().Err(err).Str("container", c.id).Msg("unreadable shim record")
	}
	if c.shim == nil || c.exit != nil {
		if c.exit != nil {
			c.exited = make(chan struct{})
			close(c.exited)
			if !exitReported(c.dir) {
				// Ended while no runtime ran: for the first subscriber.
				r.pendingExits = append(r.pendingExits, c.id)
			}
		}
		return false
	}
	c.exited = make(chan struct{})
	// The shim runs, or ended between reading its files and now, or died
	// without recording the exit: watch settles all three (it cannot record
	// before recover releases r.mu).
	alive := shimAlive(filepath.Join(c.dir, "shim.lock"))
	c.exitAtStart = !alive
	r.watch(c)
	return alive
}

// awaitInterruptedStart waits, when a runtime that stopped (crashed) during
// StartContainer left c's shim starting (spec.json written, neither shim.json
// nor exit.json yet), until that shim records how the start went: otherwise
// the container would pass for never started while its process runs, and be
// started a second time. It waits while the shim holds its lock (at most
// StartTimeout), or while the spec is too fresh for the shim to have taken the
// lock yet; a shim never launched, or dead before recording, is not waited for.
func (r *Runtime) awaitInterruptedStart(c *container) {
	spec, err := os.Stat(filepath.Join(c.dir, "spec.json"))
	if err != nil {
		return
	}
	deadline := time.Now().Add(r.cfg.StartTimeout)
	for !fileExists(filepath.Join(c.dir, "shim.json")) && !fileExists(filepath.Join(c.dir, "exit.json")) {
		starting := shimAlive(filepath.Join(c.dir, "shim.lock")) || time.Since(spec.ModTime()) < shimLaunchGrace
		if !starting {
			return
		}
		if time.Now().After(deadline) {
			r.log.Warn().Str("container", c.id).Dur("waited_ms", r.cfg.StartTimeout).
				Msg("the shim of a start a crash interrupted recorded nothing; the container counts as never started")
			return
		}
		time.Sleep(5 * time.Millisecond) // files another process writes: polled
	}
}

// shimLaunchGrace bounds the time between writing a container's spec and its
// shim holding its lock (an exec and an open).
const shimLaunchGrace = 2 * time.Second

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// recordDirs lists the record directories under root and finishes removals a
// crash interrupted.
func (r *Runtime) recordDirs(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		r.log.Warn().Err(err).Str("dir", root).Msg("cannot list state dir")
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if strings.HasPrefix(e.Name(), ".removing-") {
			_ = os.RemoveAll(p)
			continue
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		out = append(out, p)
	}
	return out
}
