package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
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
		if err != nil {
			r.log.Warn().Err(err).Str("dir", dir).Msg("skipping unreadable sandbox record")
			continue
		}
		r.sandboxes[s.id] = s
		if err := r.reserveName(s.name, s.id); err != nil {
			r.log.Warn().Err(err).Str("sandbox", s.id).Msg("duplicate sandbox name")
		}
	}

	adopted := 0
	for _, dir := range r.recordDirs(r.containersDir()) {
		c, err := r.loadContainer(dir)
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
		if r.recoverProcess(c) {
			adopted++
		}
	}
	if adopted > 0 {
		r.log.Info().Int("containers", adopted).Msg("adopted running containers")
	}
}

// recoverProcess fills c's shim and exit state from the shim's files and
// watches it when it still runs; it reports whether it does.
func (r *Runtime) recoverProcess(c *container) bool {
	var ex exitState
	switch err := readJSON(filepath.Join(c.dir, "exit.json"), &ex); {
	case err == nil:
		c.exit = &ex
	case !errors.Is(err, os.ErrNotExist):
		r.log.Warn().Err(err).Str("container", c.id).Msg("unreadable exit record")
		c.exit = &exitState{ExitCode: shimLostCode, FinishedAt: time.Now().UnixNano(), Reason: reasonUnknown, Message: err.Error()}
	}
	var st shimState
	switch err := readJSON(filepath.Join(c.dir, "shim.json"), &st); {
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
