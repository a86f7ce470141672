package userns

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func newPod(t *testing.T, podsDir, uid string, hostUsers *bool) *corev1.Pod {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(podsDir, uid), 0o750); err != nil {
		t.Fatal(err)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: corev1.PodSpec{HostUsers: hostUsers}}
}

// first is the first host id of the pod's namespace, checking its shape.
func first(t *testing.T, a *Allocator, pod *corev1.Pod) uint32 {
	t.Helper()
	ns, err := a.Mappings(pod)
	if err != nil {
		t.Fatal(err)
	}
	if ns.GetMode() != runtimeapi.NamespaceMode_POD || len(ns.GetUids()) != 1 || len(ns.GetGids()) != 1 {
		t.Fatalf("pod %s: %v, want one POD mapping", pod.UID, ns)
	}
	u, g := ns.GetUids()[0], ns.GetGids()[0]
	if u.GetContainerId() != 0 || u.GetLength() != RangeLength || u.GetHostId() != g.GetHostId() || g.GetLength() != RangeLength {
		t.Fatalf("pod %s: mappings %v", pod.UID, ns)
	}
	return u.GetHostId()
}

var no = new(bool)

// Pods with hostUsers false get disjoint, aligned ranges of the node's,
// lowest free first, the same one at every call and after a restart (from
// the record in their data dirs); the node's namespace otherwise, with
// nothing recorded. A released range goes to the next pod.
func TestAllocator(t *testing.T) {
	dir := t.TempDir()
	node := NodeRange{First: 1 << 20, Length: 4 * RangeLength}
	a, err := NewAllocator(dir, node)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, hostUsers := range []*bool{nil, &yes} {
		ns, err := a.Mappings(newPod(t, dir, "host", hostUsers))
		if err != nil || ns.GetMode() != runtimeapi.NamespaceMode_NODE || len(ns.GetUids()) != 0 {
			t.Errorf("hostUsers %v: %v, %v; want the node's namespace", hostUsers, ns, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "host", RecordFile)); !os.IsNotExist(err) {
		t.Errorf("a pod in the node's namespace has a record: %v", err)
	}

	a1, b1 := first(t, a, newPod(t, dir, "a", no)), first(t, a, newPod(t, dir, "b", no))
	if a1 != node.First || b1 != node.First+RangeLength {
		t.Errorf("ranges from %d and %d, want %d and %d", a1, b1, node.First, node.First+RangeLength)
	}
	if again := first(t, a, newPod(t, dir, "a", no)); again != a1 {
		t.Errorf("pod a's second range starts at %d, want %d", again, a1)
	}
	data, err := os.ReadFile(filepath.Join(dir, "a", RecordFile))
	var compact bytes.Buffer
	if err == nil {
		err = json.Compact(&compact, data)
	}
	if want := `{"uidMappings":[{"hostId":1048576,"containerId":0,"length":65536}],"gidMappings":[{"hostId":1048576,"containerId":0,"length":65536}]}`; err != nil || compact.String() != want {
		t.Errorf("pod a's record is %s (%v), want kubelet's %s", data, err, want)
	}

	restarted, err := NewAllocator(dir, node)
	if err != nil {
		t.Fatal(err)
	}
	if got := first(t, restarted, newPod(t, dir, "b", no)); got != b1 {
		t.Errorf("after a restart pod b's range starts at %d, want %d", got, b1)
	}
	c1 := first(t, restarted, newPod(t, dir, "c", no))
	if c1 == a1 || c1 == b1 {
		t.Errorf("after a restart pod c got a range in use: %d", c1)
	}

	if err := os.RemoveAll(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	restarted.Release("a")
	if d1 := first(t, restarted, newPod(t, dir, "d", no)); d1 != a1 {
		t.Errorf("pod d's range starts at %d, want a's released %d", d1, a1)
	}
	first(t, restarted, newPod(t, dir, "e", no))
	if ns, err := restarted.Mappings(newPod(t, dir, "f", no)); err == nil || !strings.Contains(err.Error(), "no free user namespace range: all 4") {
		t.Errorf("a fifth pod on a node of four ranges: %v, %v", ns, err)
	}
}

// A record the allocator cannot account for fails every allocation, naming
// it: its range may be in use.
func TestAllocatorRefusesBadRecords(t *testing.T) {
	node := NodeRange{First: 1 << 20, Length: 4 * RangeLength}
	for name, rec := range map[string]string{
		"malformed":    `{`,
		"outside":      `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
		"unaligned":    `{"uidMappings":[{"hostId":1048577,"containerId":0,"length":65536}],"gidMappings":[{"hostId":1048577,"containerId":0,"length":65536}]}`,
		"uids != gids": `{"uidMappings":[{"hostId":1048576,"containerId":0,"length":65536}],"gidMappings":[{"hostId":1114112,"containerId":0,"length":65536}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			newPod(t, dir, "old", no)
			if err := os.WriteFile(filepath.Join(dir, "old", RecordFile), []byte(rec), 0o600); err != nil {
				t.Fatal(err)
			}
			a, err := NewAllocator(dir, node)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Mappings(newPod(t, dir, "new", no)); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "old", RecordFile)) {
				t.Errorf("got %v, want an error naming the record", err)
			}
		})
	}
}

func TestNodeRangeValidate(t *testing.T) {
	for _, tc := range []struct {
		r    NodeRange
		fail bool
	}{
		{DefaultNodeRange, false},
		{NodeRange{First: 1 << 31, Length: 1 << 31}, false},
		{NodeRange{First: 100000, Length: RangeLength}, true},
		{NodeRange{First: RangeLength, Length: 100000}, true},
		{NodeRange{First: RangeLength, Length: 0}, true},
		{NodeRange{First: 1<<32 - RangeLength, Length: 2 * RangeLength}, true},
	} {
		if err := tc.r.Validate(); (err != nil) != tc.fail {
			t.Errorf("%+v: %v", tc.r, err)
		}
	}
}

func TestReadSubIDs(t *testing.T) {
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "subids")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("someone:100000:65536\njetlet:65536:131072\n")
	for _, tc := range []struct {
		name, uids, gids string
		want             NodeRange
		ok               bool
		wantErr          string
	}{
		{name: "named", uids: good, gids: good, want: NodeRange{First: 65536, Length: 131072}, ok: true},
		{name: "not named", uids: write("someone:100000:65536\n"), gids: write(""), ok: false},
		{name: "no files", uids: "/nonexistent/subuid", gids: "/nonexistent/subgid", ok: false},
		{name: "uids and gids differ", uids: good, gids: write("jetlet:196608:65536\n"), wantErr: "differ"},
		{name: "two ranges", uids: write("jetlet:65536:65536\njetlet:196608:65536\n"), gids: good, wantErr: "exactly one range"},
		{name: "unaligned", uids: write("jetlet:100000:65536\n"), gids: write("jetlet:100000:65536\n"), wantErr: "not a multiple"},
		{name: "malformed", uids: write("jetlet:x:65536\n"), gids: good, wantErr: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := ReadSubIDs("jetlet", tc.uids, tc.gids)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Errorf("got %+v %v %v, want %+v %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}
