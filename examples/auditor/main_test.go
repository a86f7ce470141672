package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

var auditor = &gobuild.Command{Pkg: "github.com/jetlet/jetlet/examples/auditor", Name: "auditor"}

// ledgerSeqs reads a ledger's sequences in order; a line cut short (being
// written) ends it.
func ledgerSeqs(t *testing.T, path string) []uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var seqs []uint64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && len(sc.Bytes()) > 0 {
				break
			}
			t.Fatalf("ledger line %d: %v: %s", len(seqs)+1, err, sc.Bytes())
		}
		if e.ID == "" || e.Type == "" || len(e.Data) == 0 {
			t.Fatalf("ledger line %d is no CloudEvent: %s", len(seqs)+1, sc.Bytes())
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

// auditorProcess is the auditor binary running.
type auditorProcess struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited, with err set
	err  error
}

// startAuditor runs the auditor binary on ledger; it is killed when the test
// ends if it still runs.
func startAuditor(t testing.TB, url, ledger string) *auditorProcess {
	t.Helper()
	a := &auditorProcess{cmd: exec.Command(auditor.Path(t), "--nats-url", url, "--ledger", ledger), done: make(chan struct{})}
	a.cmd.Stderr = os.Stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(a.kill)
	return a
}

func (a *auditorProcess) kill() {
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

// running fails the test when the auditor has exited.
func (a *auditorProcess) running(t testing.TB) {
	t.Helper()
	select {
	case <-a.done:
		t.Fatalf("the auditor exited: %v", a.err)
	default:
	}
}

// The auditor, a real process, follows the events of two real `jetlet run`
// nodes while pods start on both; killed with SIGKILL twice while events
// flow and started again each time, its ledger ends up holding every event
// of JETLET_EVENTS exactly once, in order. A fresh auditor then reads the
// whole stream into a second ledger: the events per second it follows.
func TestAuditorKilledAndRestartedMissesNoneAndDoublesNone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two jetlet runs")
	}
	url := natstest.RunServer(t).ClientURL()
	nodes := []string{"n1", "n2"}
	for _, n := range nodes {
		jetlettest.StartNode(t, url, n)
	}
	c, err := client.Connect(t.Context(), client.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	a := startAuditor(t, url, ledger)

	// Pods start on both nodes, one after another on each, while the
	// auditor is killed and started again.
	const podsPerNode = 25
	var wg sync.WaitGroup
	var flowing sync.Mutex // guards done
	done := 0
	for _, n := range nodes {
		wg.Go(func() {
			defer func() { flowing.Lock(); done++; flowing.Unlock() }()
			for i := range podsPerNode {
				in, err := c.Apply(ctx, n, jobPod(fmt.Sprintf("job%02d", i)))
				if err == nil {
					_, err = c.Wait(ctx, in, client.WaitOptions{})
				}
				if err != nil {
					t.Errorf("job%02d on %s: %v", i, n, err)
					return
				}
			}
		})
	}
	var atKill []int
	for range 2 {
		want := len(ledgerSeqs(t, ledger)) + 30
		poll.Until(t, time.Minute, poll.Msg(fmt.Sprintf("%d events in the ledger", want)), func() bool {
			a.running(t)
			return len(ledgerSeqs(t, ledger)) >= want
		})
		flowing.Lock()
		stillFlowing := done < len(nodes)
		flowing.Unlock()
		a.running(t)
		a.kill()
		atKill = append(atKill, len(ledgerSeqs(t, ledger)))
		if !stillFlowing {
			t.Fatalf("the pods had all started before the kill at %d events: kill it sooner", atKill[len(atKill)-1])
		}
		a = startAuditor(t, url, ledger)
	}
	wg.Wait()

	// Every event stored, once each, in order. Events still come (the
	// last containers' deaths): the ledger is a prefix of the stream.
	readStream := func() []uint64 {
		var seqs []uint64
		if err := c.Events(ctx, client.EventsOptions{}, func(e *client.Event) error {
			seqs = append(seqs, e.Seq)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	poll.Until(t, time.Minute, poll.Msg("the ledger to hold every event of JETLET_EVENTS"), func() bool {
		n := len(readStream())
		a.running(t)
		return len(ledgerSeqs(t, ledger)) >= n
	})
	got := ledgerSeqs(t, ledger)
	stream := readStream()
	if len(got) > len(stream) || !slices.Equal(got, stream[:len(got)]) {
		t.Fatalf("ledger holds %d events, the stream %d: want the stream's, once each, in order\nledger %v\nstream %v", len(got), len(stream), got, stream)
	}
	t.Logf("killed at %v lines of the ledger; after two restarts it holds %d events, the stream %d: none missing, none twice", atKill, len(got), len(stream))

	// A fresh auditor reads the stream from its start.
	fresh := filepath.Join(t.TempDir(), "fresh.jsonl")
	start := time.Now()
	f := startAuditor(t, url, fresh)
	poll.Until(t, time.Minute, poll.Msg("the fresh ledger to catch up"), func() bool {
		f.running(t)
		return len(ledgerSeqs(t, fresh)) >= len(stream)
	})
	elapsed := time.Since(start)
	t.Logf("a fresh auditor followed %d events in %s (connect included): %.0f events/s", len(stream), elapsed.Round(time.Millisecond), float64(len(stream))/elapsed.Seconds())
}

// jobPod runs to its end at once: a sandbox and a container created,
// started and dead, each an event.
func jobPod(name string) *corev1.Pod {
	grace := int64(0)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "job", Image: "busybox:1.36", Command: []string{"true"}}},
		},
	}
}

// A ledger whose last line was cut short by a crash is cut back to its
// whole lines, and the auditor resumes after the last of them; a file that
// is not a ledger is refused.
func TestOpenLedgerCutsATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	whole := `{"specversion":"1.0","id":"a","jetletseq":3}` + "\n" + `{"specversion":"1.0","id":"b","jetletseq":7}` + "\n"
	if err := os.WriteFile(path, []byte(whole+`{"specversion":"1.0","id":"c","jet`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, last, err := openLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, _ := os.ReadFile(path)
	if last != 7 || string(data) != whole {
		t.Fatalf("last %d, ledger %q; want 7 and the two whole lines", last, data)
	}
	if err := os.WriteFile(path, []byte(whole+whole), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openLedger(path); err == nil {
		t.Fatal("a ledger with an event twice was opened")
	}
}

// BenchmarkAuditorFollows stores 20,000 events on a server of its own, as
// nodes would, and reports how many a fresh auditor follows into its ledger
// a second, each line written and synced to disk:
//
//	go test -run '^$' -bench AuditorFollows -benchtime 1x ./examples/auditor
func BenchmarkAuditorFollows(b *testing.B) {
	const events = 20000
	srv := natstest.RunServer(b)
	_, js := natstest.Connect(b, srv)
	jetlettest.Provision(b, js)
	subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
	for i := range events {
		ev := schemas.LifecycleEvent{APIVersion: schemas.APIVersion, Kind: schemas.KindLifecycleEvent, ID: fmt.Sprint(i),
			Type: schemas.EventContainerStarted, Node: "n1", UID: fmt.Sprintf("u%d", i%50), Namespace: "default", Pod: "web", Time: time.Now()}
		data, err := json.Marshal(ev)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishAsync(subj.Event(ev.Node, ev.UID, ev.Type), data); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("the events were not stored within a minute")
	}
	lines := func(path string) int {
		data, _ := os.ReadFile(path)
		return bytes.Count(data, []byte("\n"))
	}
	b.ResetTimer()
	for range b.N {
		ledger := filepath.Join(b.TempDir(), "ledger.jsonl")
		start := time.Now()
		a := startAuditor(b, srv.ClientURL(), ledger)
		poll.Until(b, 2*time.Minute, poll.Msg("the auditor to follow every event"), func() bool {
			a.running(b)
			return lines(ledger) >= events
		})
		b.ReportMetric(events/time.Since(start).Seconds(), "events/s")
		a.kill()
	}
}
