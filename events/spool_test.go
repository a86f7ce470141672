package events

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/schemas"
)

func spoolEvent(t testing.TB, uid, id string, typ schemas.EventType) queuedEvent {
	t.Helper()
	data, err := json.Marshal(schemas.LifecycleEvent{UID: uid, ID: id, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("jetlet.event.n1." + uid + "." + string(typ))
	msg.Data = data
	msg.Header.Set("Nats-Msg-Id", id)
	return queuedEvent{uid: uid, id: id, terminal: typ == schemas.EventPodTerminated, msg: msg}
}

func ids(es []queuedEvent) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.id)
	}
	return out
}

// TestSpoolKeepsWhatIsNotSettled: the events appended and not settled are
// read again by the next open, in order, with their subject, headers and
// data; settled ones are not, and a cut last line is skipped.
func TestSpoolKeepsWhatIsNotSettled(t *testing.T) {
	dir := t.TempDir()
	sp, left, err := openSpool(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("new spool: %v, %d events", err, len(left))
	}
	var appended []queuedEvent
	for i, id := range []string{"s1.SandboxCreated", "c1.ContainerStarted", "c1.ContainerDied", "s1.PodTerminated"} {
		e := spoolEvent(t, "u1", id, []schemas.EventType{schemas.EventSandboxCreated, schemas.EventContainerStarted, schemas.EventContainerDied, schemas.EventPodTerminated}[i])
		if err := sp.append(&e); err != nil {
			t.Fatal(err)
		}
		appended = append(appended, e)
	}
	if err := sp.settle(appended[1].n); err != nil {
		t.Fatal(err)
	}
	// A line cut by a crash of the host.
	if _, err := sp.cur.Write([]byte(`{"subject":"jetlet.ev`)); err != nil {
		t.Fatal(err)
	}
	sp.cur.Close()

	_, left, err = openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The current segment is dropped only once everything in it is settled.
	if got := ids(left); len(got) != 4 {
		t.Fatalf("reopened: %v, want the 4 events of an unsettled segment", got)
	}
	last := left[3]
	if last.id != "s1.PodTerminated" || !last.terminal || last.uid != "u1" || last.msg.Subject != "jetlet.event.n1.u1.PodTerminated" || last.msg.Header.Get("Nats-Msg-Id") != "s1.PodTerminated" {
		t.Errorf("reopened event: %+v %+v", last, last.msg)
	}
}

// TestSpoolDropsSettledSegments: once every event in it is settled the
// current segment is emptied, and full segments go as their events do.
func TestSpoolDropsSettledSegments(t *testing.T) {
	dir := t.TempDir()
	sp, _, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := spoolEvent(t, "u1", "c1.ContainerStarted", schemas.EventContainerStarted)
	if err := sp.append(&e); err != nil {
		t.Fatal(err)
	}
	if err := sp.settle(e.n); err != nil {
		t.Fatal(err)
	}
	if _, left, err := openSpool(dir); err != nil || len(left) != 0 {
		t.Fatalf("after settling everything: %v, %v", err, ids(left))
	}

	// Enough events for three segments: settling the first segment's
	// events removes its file only.
	var all []queuedEvent
	for len(sp.closed) < 2 {
		e := spoolEvent(t, "u1", "c2.ContainerStarted", schemas.EventContainerStarted)
		if err := sp.append(&e); err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	first := sp.closed[0]
	if err := sp.settle(first.last); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first.path); !os.IsNotExist(err) {
		t.Errorf("settled segment %s still there: %v", first.path, err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(after) != len(files)-1 {
		t.Errorf("segments %v after settling the first of %v", after, files)
	}
	_, left, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(all) - int(first.last-all[0].n+1); len(left) != want {
		t.Errorf("reopened %d events, want %d", len(left), want)
	}
}

// BenchmarkSpoolAppend is what keeping an event on disk adds to its Emit
// and its settling once stored: one write (a sync at most once a second)
// and a truncate.
func BenchmarkSpoolAppend(b *testing.B) {
	sp, _, err := openSpool(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	e := spoolEvent(b, "u1", "c1.ContainerStarted", schemas.EventContainerStarted)
	for range b.N {
		if err := sp.append(&e); err != nil {
			b.Fatal(err)
		}
		if err := sp.settle(e.n); err != nil {
			b.Fatal(err)
		}
	}
}
