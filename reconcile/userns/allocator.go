// Package userns gives pods with hostUsers: false their user namespace's ids,
// as kubelet's userns manager (pkg/kubelet/userns): a range of 65536 host
// uids and gids per pod, aligned, from the node's range, recorded in the
// pod's data dir so that it outlives a restart of jetlet, and free again
// once the pod's data dir is removed.
package userns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

// RangeLength is the number of ids of each pod's namespace (kubelet's
// userNsLength): uids 0 to 65535 in the pod.
const RangeLength = 1 << 16

// RecordFile is the name of a pod's record in its data dir (kubelet's
// "userns" file in the pod's dir, in its format).
const RecordFile = "userns"

// NodeRange is the host ids the node gives pods' namespaces: Length ids from
// First, both multiples of RangeLength.
type NodeRange struct {
	First, Length uint32
}

// DefaultNodeRange is kubelet's when no subordinate ids name its user:
// every id but the host's first 65536.
var DefaultNodeRange = NodeRange{First: RangeLength, Length: 1<<32 - RangeLength}

// Validate checks the range as kubelet checks its subordinate ids.
func (r NodeRange) Validate() error {
	switch {
	case r.First%RangeLength != 0:
		return fmt.Errorf("user namespace range: first id %d is not a multiple of %d", r.First, RangeLength)
	case r.Length < RangeLength || r.Length%RangeLength != 0:
		return fmt.Errorf("user namespace range: length %d is not a positive multiple of %d", r.Length, RangeLength)
	case uint64(r.First)+uint64(r.Length) > 1<<32:
		return fmt.Errorf("user namespace range: %d ids from %d pass the last id", r.Length, r.First)
	}
	return nil
}

// Allocator hands out pods' ranges. Its record of them is read from the pods'
// data dirs at its first use. Safe for concurrent use.
type Allocator struct {
	podsDir string // <data dir>/pods: <podsDir>/<uid>/userns
	node    NodeRange

	mu     sync.Mutex // guards the fields below
	loaded bool
	byPod  map[string]uint32 // pod uid -> the first host id of its range
	byID   map[uint32]string // the first host id of a range -> its pod
}

// NewAllocator returns an allocator of node's range for the pods whose data
// dirs are under podsDir. It does no I/O.
func NewAllocator(podsDir string, node NodeRange) (*Allocator, error) {
	if err := node.Validate(); err != nil {
		return nil, err
	}
	return &Allocator{podsDir: podsDir, node: node}, nil
}

// Mappings is the user namespace of pod for the CRI's NamespaceOption, as
// kubelet's GetOrCreateUserNamespaceMappings: the node's (mode NODE) unless
// hostUsers is false; then the pod's own, its recorded range or a free one,
// recorded now in its data dir, which must exist.
func (a *Allocator) Mappings(pod *corev1.Pod) (*runtimeapi.UserNamespace, error) {
	if HostUsers(pod) {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	uid := string(pod.UID)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.loadLocked(); err != nil {
		return nil, err
	}
	first, ok := a.byPod[uid]
	if !ok {
		var err error
		if first, err = a.freeLocked(); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteJSON(filepath.Join(a.podsDir, uid, RecordFile), toRecord(first)); err != nil {
			return nil, fmt.Errorf("record the pod's user namespace: %w", err)
		}
		a.byPod[uid], a.byID[first] = first, uid
	}
	m := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: first, Length: RangeLength}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}, nil
}

// HostUsers reports whether pod runs in the node's user namespace: unless
// it sets hostUsers false.
func HostUsers(pod *corev1.Pod) bool {
	return pod.Spec.HostUsers == nil || *pod.Spec.HostUsers
}

// Release frees the range of the pod uid, whose data dir is gone.
func (a *Allocator) Release(uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if first, ok := a.byPod[uid]; ok {
		delete(a.byPod, uid)
		delete(a.byID, first)
	}
}

// freeLocked is the first free range, lowest first.
func (a *Allocator) freeLocked() (uint32, error) {
	n := a.node.Length / RangeLength
	for i := range n {
		first := a.node.First + i*RangeLength
		if _, used := a.byID[first]; !used {
			return first, nil
		}
	}
	return 0, fmt.Errorf("no free user namespace range: all %d of the node's are in use", n)
}

// loadLocked reads the record of every pod's data dir once. A record that
// is unreadable, malformed or outside the node's range fails every
// allocation, as it fails kubelet's start: its range may be in use.
func (a *Allocator) loadLocked() error {
	if a.loaded {
		return nil
	}
	byPod, byID := map[string]uint32{}, map[uint32]string{}
	entries, err := os.ReadDir(a.podsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the pods' user namespaces: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(a.podsDir, e.Name(), RecordFile)
		var rec record
		err := atomicfile.ReadJSON(path, &rec)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			var first uint32
			if first, err = a.check(rec); err == nil {
				if other, taken := byID[first]; taken {
					err = fmt.Errorf("its range is pod %s's too", other)
				}
				byPod[e.Name()], byID[first] = first, e.Name()
			}
		}
		if err != nil {
			return fmt.Errorf("user namespace record %s: %w", path, err)
		}
	}
	a.byPod, a.byID, a.loaded = byPod, byID, true
	return nil
}

// check returns the first host id of a record that maps the pod's 65536 ids
// from 0 to one aligned range of the node's, the same for uids and gids.
func (a *Allocator) check(rec record) (uint32, error) {
	if len(rec.UIDs) != 1 || len(rec.GIDs) != 1 || rec.UIDs[0] != rec.GIDs[0] {
		return 0, errors.New("want one mapping, the same for uids and gids")
	}
	m := rec.UIDs[0]
	if m.ContainerID != 0 || m.Length != RangeLength || m.HostID%RangeLength != 0 ||
		m.HostID < a.node.First || uint64(m.HostID)+RangeLength > uint64(a.node.First)+uint64(a.node.Length) {
		return 0, fmt.Errorf("mapping %d:%d:%d is not one of the node's ranges", m.ContainerID, m.HostID, m.Length)
	}
	return m.HostID, nil
}

// record is kubelet's userns file.
type record struct {
	UIDs []idMapping `json:"uidMappings"`
	GIDs []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

func toRecord(first uint32) record {
	m := []idMapping{{HostID: first, ContainerID: 0, Length: RangeLength}}
	return record{UIDs: m, GIDs: m}
}
