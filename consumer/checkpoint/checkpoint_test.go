package checkpoint_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/consumer/checkpoint"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
)

func desired(uid string, seq uint64, rev int64, image string) podworkers.Desired {
	return podworkers.Desired{UID: uid, IntentSeq: seq, Intent: &schemas.PodIntent{
		APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Op: schemas.OpApply, Revision: rev,
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}},
	}}
}

func seqs(t *testing.T, s *checkpoint.Store) map[string]uint64 {
	t.Helper()
	ds, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, d := range ds {
		out[d.UID] = d.IntentSeq
	}
	return out
}

// TestCheckpointWritesOnlyWhatChanged: an intent that changes only the
// sequence and revision writes nothing; one that changes the pod does, and
// a new Store reads it back; Replace keeps only what it is given.
func TestCheckpointWritesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	s := checkpoint.New(dir)
	if got := seqs(t, s); len(got) != 0 {
		t.Fatalf("new checkpoint: %v", got)
	}
	for _, d := range []podworkers.Desired{desired("a", 1, 1, "busybox"), desired("a", 2, 2, "busybox"), desired("b", 3, 1, "busybox")} {
		if err := s.Record(d); err != nil {
			t.Fatal(err)
		}
	}
	if got := seqs(t, checkpoint.New(dir)); got["a"] != 1 || got["b"] != 3 {
		t.Errorf("after a no-op intent of a: %v, want a at 1 (not written), b at 3", got)
	}
	if err := s.Record(desired("a", 4, 3, "httpd")); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, checkpoint.New(dir)); got["a"] != 4 {
		t.Errorf("after a's spec changed: %v, want a at 4", got)
	}
	if err := s.Replace([]podworkers.Desired{desired("b", 5, 1, "httpd")}); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, checkpoint.New(dir)); len(got) != 1 || got["b"] != 5 {
		t.Errorf("after Replace with b alone: %v", got)
	}
	if err := s.Forget("b"); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, checkpoint.New(dir)); len(got) != 0 {
		t.Errorf("after Forget: %v", got)
	}
}

// TestCheckpointRefusesADamagedFile: a file that does not parse is an
// error naming it, not a checkpoint without that pod.
func TestCheckpointRefusesADamagedFile(t *testing.T) {
	dir := t.TempDir()
	s := checkpoint.New(dir)
	if err := s.Record(desired("a", 1, 1, "busybox")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, checkpoint.Dir, "a.json")
	if err := os.WriteFile(path, []byte(`{"intentSeq":1,"intent":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.New(dir).Load(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load of a damaged file: %v, want an error naming %s", err, path)
	}
}

// BenchmarkRecordNoOp is the cost a converged pod's no-op intent adds to
// its sync: a digest, no write.
func BenchmarkRecordNoOp(b *testing.B) {
	s := checkpoint.New(b.TempDir())
	if err := s.Record(desired("a", 1, 1, "busybox")); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if err := s.Record(desired("a", uint64(i+2), int64(i+2), "busybox")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordChanged is the cost of an applied intent that changes its
// pod: a synced write.
func BenchmarkRecordChanged(b *testing.B) {
	s := checkpoint.New(b.TempDir())
	for i := range b.N {
		if err := s.Record(desired("a", uint64(i+1), int64(i+1), "busybox:"+string(rune('a'+i%26)))); err != nil {
			b.Fatal(err)
		}
	}
}

// A new node's first recovery desires nothing and has recorded nothing:
// Replace has no directory to read and nothing to do.
func TestReplaceOnANewNode(t *testing.T) {
	dir := t.TempDir()
	if err := checkpoint.New(dir).Replace(nil); err != nil {
		t.Fatalf("a new node's empty checkpoint: %v", err)
	}
}
