package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// cordonFile, in the data dir, exists while the node is cordoned: a cordon
// outlives restarts of jetlet, as a Node's spec.unschedulable outlives
// kubelet's.
const cordonFile = "cordoned"

// cordon is the node's cordon (docs/contract.md section 14), set by `jetlet node
// cordon|uncordon` over the node service. Admission reads it for every new
// pod, the heartbeat for the node's record.
type cordon struct {
	path string
	// mu orders the changes: the file and on agree once Set returns.
	mu sync.Mutex
	on atomic.Bool // read without mu by admission and the heartbeat
	// changed gets a signal per change, for the heartbeat.
	changed chan struct{}
}

// loadCordon reads the cordon kept in dataDir.
func loadCordon(dataDir string) (*cordon, error) {
	c := &cordon{path: filepath.Join(dataDir, cordonFile), changed: make(chan struct{}, 1)}
	_, err := os.Stat(c.path)
	switch {
	case err == nil:
		c.on.Store(true)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("cordon: %w", err)
	}
	return c, nil
}

// On reports whether the node is cordoned.
func (c *cordon) On() bool { return c.on.Load() }

// Changed signals each change of the cordon.
func (c *cordon) Changed() <-chan struct{} { return c.changed }

// Set cordons (on) or uncordons the node, kept in the data dir before it
// takes effect; changed is false when it was so already.
func (c *cordon) Set(on bool) (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on.Load() == on {
		return false, nil
	}
	if on {
		err = os.WriteFile(c.path, nil, 0o600)
	} else {
		err = os.Remove(c.path)
	}
	if err != nil {
		return false, fmt.Errorf("cordon kept in %s: %w", c.path, err)
	}
	c.on.Store(on)
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return true, nil
}
