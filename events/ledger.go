package events

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/bus"
)

// ledger knows which events JETLET_EVENTS holds, per pod: the ids of its
// stored events. It makes each fact stored once however long jetlet was away,
// where the stream's duplicate window forgets an id after 2 minutes.
//
// A pod's ids are read back from the stream the first time the pod has an
// event to publish (after a start, or after the pod was forgotten), then kept
// as its events are stored. A pod is forgotten once its PodTerminated is
// stored (later events of the pod, garbage collection's, read it back again),
// and when a publish of one of its events failed: whether that one was stored
// is unknown until the stream is read again. So memory holds, per pod that
// had an event since start and is not terminated, the ids of its events: a
// few per container instance (a crash loop adds four per restart, at most
// about 300 restarts a day with the 5-minute back-off).
//
// Only the publisher's event loop (Run) uses it, one batch at a time:
// it needs no lock.
type ledger struct {
	pods map[string]map[string]struct{} // uid → ids of its stored events
}

func (l *ledger) loaded(uid string) bool {
	_, ok := l.pods[uid]
	return ok
}

// stored reports whether the pod's event id is stored; the pod must be loaded.
func (l *ledger) stored(uid, id string) bool {
	_, ok := l.pods[uid][id]
	return ok
}

// add records a stored event. A pod not loaded stays so: a partial set of
// ids would pass the others for unpublished.
func (l *ledger) add(uid, id string) {
	if ids, ok := l.pods[uid]; ok {
		ids[id] = struct{}{}
	}
}

func (l *ledger) forget(uid string) { delete(l.pods, uid) }

// readBackParallel bounds the pods read back at once: a node has as many
// events read-back consumers.
const readBackParallel = bus.EventsReadBackSlots

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
	sets := make([]map[string]struct{}, len(uids))
	errs := make([]error, len(uids))
	// Each read-back holds one of the node's read-back consumers, whose
	// names are fixed (bus.EventsReadBackName).
	slots := make(chan int, readBackParallel)
	for slot := range readBackParallel {
		slots <- slot
	}
	var wg sync.WaitGroup
	for i, uid := range uids {
		slot := <-slots
		wg.Go(func() {
			defer func() { slots <- slot }()
			sets[i], errs[i] = p.readBack(ctx, uid, slot)
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
		p.ledger.pods[uid] = sets[i]
	}
	if failed > 0 {
		p.cfg.Failures.WithLabelValues("ledger").Add(float64(failed))
		return fmt.Errorf("read back the stored events of %d of %d pods: %w", failed, len(uids), firstErr)
	}
	return nil
}

const (
	// readBackWait bounds the wait for a read-back batch.
	readBackWait = time.Second
	// readBackEmptyRounds is how many empty batches, events still pending, a
	// read-back takes before it fails (and is retried later).
	readBackEmptyRounds = 3
)

// readBack returns the ids of every event of the pod the stream holds: the
// node's read-back consumer number slot, filtered on the pod's events,
// delivers their headers until none is pending.
func (p *EventPublisher) readBack(ctx context.Context, uid string, slot int) (map[string]struct{}, error) {
	name := bus.EventsReadBackName(p.cfg.Node, slot)
	cons, err := bus.CreateReadBack(ctx, p.js, p.cfg.Denials, schemas.StreamEvents, jetstream.ConsumerConfig{
		Name:          name,
		FilterSubject: p.subj.PodEvents(p.cfg.Node, uid),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		HeadersOnly:   true,
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", uid, err)
	}
	defer bus.DeleteReadBack(ctx, p.js, schemas.StreamEvents, name)
	ids := map[string]struct{}{}
	empty := 0
	for pending := cons.CachedInfo().NumPending; pending > 0; {
		// Waits for the batch: a server that has just restarted may deliver
		// what it holds a little late, and no wait would take that for none.
		batch, err := cons.Fetch(int(min(pending, 1024)), jetstream.FetchMaxWait(readBackWait))
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", uid, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ids[m.Headers().Get(jetstream.MsgIDHeader)] = struct{}{}
			if md, err := m.Metadata(); err == nil {
				pending = md.NumPending
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("pod %s: %w", uid, err)
		}
		if got > 0 {
			empty = 0
			continue
		}
		// Nothing came: the pending ones aged out of the stream meanwhile,
		// or are not delivered yet. Only the consumer's own count may say
		// they are gone; an event taken for absent would be stored twice.
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", uid, err)
		}
		if pending = info.NumPending; pending == 0 {
			break
		}
		if empty++; empty >= readBackEmptyRounds {
			return nil, fmt.Errorf("pod %s: %d of its events pending but none delivered", uid, pending)
		}
	}
	return ids, nil
}
