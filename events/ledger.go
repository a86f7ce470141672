package events

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// ledger knows which events JETLET_EVENTS holds, per pod: the ids of its
// stored events and the sequence of its last one. It makes each fact stored
// once however long jetlet was away, where the stream's duplicate window
// forgets an id after 2 minutes.
//
// A pod's ids are read back from the stream the first time the pod has an
// event to publish (after a start, or after the pod was forgotten), then kept
// as its events are stored. Each event is published with
// Nats-Expected-Last-Subject-Sequence(-Subject) naming the last sequence of
// the pod's events as the ledger knows it, so that the stream's leader
// refuses it if anything was stored for the pod meanwhile: a copy the
// servers queued past our timeout, stored after we read the pod back, can
// never join a second copy, at any age. (A read back may come from a
// lagging replica; the leader's check turns that into a refusal.) So a pod's
// events are published one at a time, pods side by side.
//
// A pod is forgotten once its PodTerminated is stored (later events of the
// pod, garbage collection's, read it back again), and when a publish of one
// of its events failed or was refused: whether that one was stored is
// unknown until the stream is read again. So memory holds, per pod that had
// an event since start and is not terminated, the ids of its events: a few
// per container instance (a crash loop adds four per restart, at most about
// 300 restarts a day with the 5-minute back-off).
//
// Only the publisher's event loop (Run) uses it, one batch at a time:
// it needs no lock.
type ledger struct {
	pods map[string]*podLedger // by uid
}

// podLedger is what one pod's events hold.
type podLedger struct {
	ids  map[string]struct{}
	last uint64 // the sequence of the pod's last event; 0: none
}

func (l *ledger) loaded(uid string) bool {
	_, ok := l.pods[uid]
	return ok
}

// stored reports whether the pod's event id is stored; the pod must be loaded.
func (l *ledger) stored(uid, id string) bool {
	_, ok := l.pods[uid].ids[id]
	return ok
}

// lastOf is the sequence of the pod's last event; the pod must be loaded.
func (l *ledger) lastOf(uid string) uint64 { return l.pods[uid].last }

// add records an event stored at seq. A pod not loaded stays so: a partial
// set of ids would pass the others for unpublished.
func (l *ledger) add(uid, id string, seq uint64) {
	if pl, ok := l.pods[uid]; ok {
		pl.ids[id] = struct{}{}
		pl.last = seq
	}
}

func (l *ledger) forget(uid string) { delete(l.pods, uid) }

// readBackParallel bounds the pods read back at once.
const readBackParallel = 8

// loadLedgers reads back every pod of events whose ledger is not loaded. The
// pods read keep their ledger even when others failed.
func (p *EventPublisher) loadLedgers(ctx context.Context, events []queuedEvent) error {
	var uids []string
	seen := map[string]bool{}
	for _, e := range events {
		if !seen[e.uid] && !p.ledger.loaded(e.uid) {
			seen[e.uid] = true
			uids = append(uids, e.uid)
		}
	}
	pods := make([]*podLedger, len(uids))
	errs := make([]error, len(uids))
	slots := make(chan struct{}, readBackParallel)
	var wg sync.WaitGroup
	for i, uid := range uids {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			pods[i], errs[i] = p.readBack(ctx, uid)
		})
	}
	wg.Wait()
	failed, firstErr := 0, error(nil)
	for i, uid := range uids {
		if errs[i] != nil {
			failed++
			firstErr = cmp.Or(firstErr, errs[i])
			continue
		}
		p.ledger.pods[uid] = pods[i]
	}
	if failed > 0 {
		p.cfg.Failures.WithLabelValues("ledger").Add(float64(failed))
		return fmt.Errorf("read back the stored events of %d of %d pods: %w", failed, len(uids), firstErr)
	}
	return nil
}

// readBack reads the ids of every event of the pod the stream holds, with
// batched direct gets: no consumer.
func (p *EventPublisher) readBack(ctx context.Context, uid string) (*podLedger, error) {
	pl := &podLedger{ids: map[string]struct{}{}}
	last, err := natsjs.ReadStored(ctx, p.js, p.cfg.Denials, schemas.StreamEvents, p.subj.PodEvents(p.cfg.Node, uid), time.Time{},
		func(m *jetstream.RawStreamMsg) error {
			pl.ids[m.Header.Get(jetstream.MsgIDHeader)] = struct{}{}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", uid, err)
	}
	pl.last = last
	return pl, nil
}
