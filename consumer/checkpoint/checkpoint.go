// Package checkpoint keeps, in the node's data dir, each pod's applied
// intent: the desired state the pod workers reached, with the intent's
// stream sequence. A node that starts while its bus cannot be reached runs
// its pods from it (KubeEdge's MetaManager keeps such a copy); the intents
// stream stays the truth and replaces it as soon as it can be read
// (docs/operations.md, Offline).
package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"

	"k8s.io/utils/ptr"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
)

// Dir is the checkpoint's directory in the data dir: a file a pod, named
// by its uid.
const Dir = "checkpoint"

// record is one pod's file.
type record struct {
	IntentSeq uint64             `json:"intentSeq"`
	Intent    *schemas.PodIntent `json:"intent"`
}

// Store is the checkpoint of one node. Its methods may be called from any
// goroutine, but Record and Forget of one pod not at once (the consumer
// calls them from the pod's worker): mu guards written only, so that pods'
// writes run side by side.
type Store struct {
	dir string

	mu sync.Mutex
	// written holds, per pod, the intent its file says (mu): an intent that
	// changes nothing else (a no-op re-send) writes nothing.
	written map[string]*schemas.PodIntent
}

// New returns the checkpoint kept under dataDir; it does no I/O before Load.
func New(dataDir string) *Store {
	return &Store{dir: filepath.Join(dataDir, Dir), written: map[string]*schemas.PodIntent{}}
}

// Load reads every pod's applied intent. A file that does not parse is an
// error naming it: running half a node's pods would kill none of the rest,
// but would hide that the copy is damaged.
func (s *Store) Load() ([]podworkers.Desired, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []podworkers.Desired
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !schemas.ValidUID(uid) {
			continue // a temporary file of a write cut short
		}
		var r record
		if err := atomicfile.ReadJSON(filepath.Join(s.dir, e.Name()), &r); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		if r.Intent == nil || r.Intent.Pod == nil || (r.Intent.Op != schemas.OpApply && r.Intent.Op != schemas.OpDelete) {
			return nil, fmt.Errorf("checkpoint: %s: no applied intent", e.Name())
		}
		s.written[uid] = r.Intent
		out = append(out, podworkers.Desired{UID: uid, Intent: r.Intent, IntentSeq: r.IntentSeq})
	}
	return out, nil
}

// Record keeps d as its pod's applied intent. The file is written (synced
// and renamed into place) only when the intent differs from the one kept in
// more than its sequence and revision, so a converged pod's no-op intents
// cost a comparison, not a write: its file may then name an older intent of
// the same content.
func (s *Store) Record(d podworkers.Desired) error {
	s.mu.Lock()
	prev := s.written[d.UID]
	s.mu.Unlock()
	if prev != nil && sameRun(prev, d.Intent) {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err := atomicfile.WriteJSON(s.path(d.UID), record{IntentSeq: d.IntentSeq, Intent: d.Intent})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.written, d.UID) // its file may be either
		return fmt.Errorf("checkpoint of pod %s: %w", d.UID, err)
	}
	s.written[d.UID] = d.Intent
	return nil
}

// Forget drops pod uid's applied intent.
func (s *Store) Forget(uid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, uid)
	if err := os.Remove(s.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint of pod %s: %w", uid, err)
	}
	return nil
}

// Replace makes the checkpoint say desired and nothing else: the desired
// state recovered from the intents stream, which is the truth.
func (s *Store) Replace(desired []podworkers.Desired) error {
	keep := map[string]bool{}
	for _, d := range desired {
		keep[d.UID] = true
		if err := s.Record(d); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing recorded yet, nothing desired: a new node
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range entries {
		if uid, ok := strings.CutSuffix(e.Name(), ".json"); ok && !keep[uid] {
			if err := s.Forget(uid); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) path(uid string) string { return filepath.Join(s.dir, uid+".json") }

// sameRun reports whether two intents say the same of the pod's run: all
// but their revision (the consumer's staleness, which the stream decides
// again).
func sameRun(a, b *schemas.PodIntent) bool {
	return a.Op == b.Op && ptr.Equal(a.GracePeriodSeconds, b.GracePeriodSeconds) && reflect.DeepEqual(a.Pod, b.Pod)
}
