package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
)

// recover rebuilds every pod's desired state before any intent is consumed,
// then queues a sync of each pod, so that a restarted jetlet adopts what runs
// (without restarting what still matches its intent) and kills what no intent
// wants any more.
//
// The desired state is what the pod workers would have reached: the intents
// the stream keeps for this node are replayed in order through the same
// decision as live ones (newest valid, not stale). Every intent newer than the
// pod's last stored result has no answer yet: it is queued to be answered
// now, before any new intent, so that each pod's results stay in intent
// order even though the durable consumer would redeliver it only after its
// ack wait. When the consumer does redeliver it, it is acked as answered.
func (c *Consumer) recover(ctx context.Context) error {
	start := time.Now()
	replayed, kept, err := c.replay(ctx)
	if err != nil {
		return fmt.Errorf("replay intents: %w", err)
	}
	unanswered, err := c.queueUnanswered(ctx, kept, start)
	if err != nil {
		return err
	}
	running, err := c.sync.RunningPods(ctx)
	if err != nil {
		return fmt.Errorf("list the runtime's pods: %w", err)
	}
	orphans := 0
	c.mu.Lock()
	for _, ref := range running {
		p := c.podLocked(ref.UID)
		if p.desired == nil {
			// No intent wants it: delete it as an intent would.
			orphans++
			p.desired = &Desired{UID: ref.UID, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{
				APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Op: schemas.OpDelete,
				Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(ref.UID), Name: ref.Name, Namespace: ref.Namespace}},
			}}
		}
	}
	for _, p := range c.pods {
		p.wake = p.live()
		if p.wake || len(p.pending) > 0 {
			c.scheduleLocked(p)
		}
	}
	pods := len(c.pods)
	c.mu.Unlock()
	c.log.Info().Int("intents", replayed).Int("unanswered", unanswered).Int("pods", pods).Int("running", len(running)).Int("orphans", orphans).
		Dur("took", time.Since(start)).Msg("desired state recovered; syncing every pod")
	return nil
}

// queueUnanswered queues, per pod and in stream order, the kept intents
// newer than the pod's last stored result.
func (c *Consumer) queueUnanswered(ctx context.Context, kept map[string][]*delivery, now time.Time) (int, error) {
	queued := 0
	for uid, ds := range kept {
		last, err := c.pub.LastResultSeq(ctx, uid)
		if err != nil {
			return queued, fmt.Errorf("last result of pod %s: %w", uid, err)
		}
		c.mu.Lock()
		p := c.podLocked(uid)
		p.answered = max(p.answered, last)
		for _, d := range ds {
			if _, queued := c.held[d.seq]; queued || d.seq <= last {
				continue // answered, or queued by an earlier attempt
			}
			d.receivedAt = now
			c.held[d.seq] = d
			p.pending = append(p.pending, d)
			queued++
		}
		c.mu.Unlock()
	}
	return queued, nil
}

// replay reads every intent kept for this node, oldest first, and sets each
// pod's desired state and highest revision. It returns how many it read and
// the intents per pod.
func (c *Consumer) replay(ctx context.Context) (int, map[string][]*delivery, error) {
	kept := map[string][]*delivery{}
	stream, err := c.js.Stream(ctx, schemas.StreamIntents)
	if err != nil {
		return 0, nil, err
	}
	filter := c.subj.NodeIntents(c.cfg.Node)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, nil, err
	}
	total := 0
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	if total == 0 {
		return 0, kept, nil
	}
	oc, err := c.replayConsumer(ctx, filter)
	if err != nil {
		return 0, nil, err
	}
	defer func() {
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.js.DeleteConsumer(delCtx, schemas.StreamIntents, ReplayName(c.cfg.Node))
	}()
	read := 0
	for read < total {
		batch, err := oc.Fetch(min(total-read, 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return read, nil, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			read++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			if uid, ok := c.subj.IntentUID(msg.Subject(), c.cfg.Node); ok {
				d := newDelivery(msg, meta)
				d.msg = nil // the replay consumer's handle acks nothing of the durable's
				kept[uid] = append(kept[uid], d)
				c.replayOne(uid, d)
			}
		}
		if err := batch.Error(); err != nil {
			return read, nil, err
		}
		if got == 0 {
			break // trimmed meanwhile
		}
	}
	return read, kept, nil
}

func (c *Consumer) replayOne(uid string, d *delivery) {
	in, err := schemas.DecodeIntent(d.data, schemas.IntentTarget{
		Node: c.cfg.Node, UID: uid, MaxBodyBytes: c.cfg.MaxIntentBytes, AllowPrivileged: c.cfg.AllowPrivileged,
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.podLocked(uid)
	if _, apply := decide([]candidate{{seq: d.seq, intent: in, err: err}}, p.done); apply < 0 {
		if p.desired == nil {
			delete(c.pods, uid) // never had a valid intent
		}
		return
	}
	if in.Op == schemas.OpDelete && p.desired != nil && p.desired.Intent.Op == schemas.OpApply {
		in = deleteOf(in, p.desired.Intent)
	}
	p.desired = &Desired{UID: uid, Intent: in, IntentSeq: d.seq, ReceivedAt: d.receivedAt}
	p.done = applied{seq: d.seq, revision: max(p.done.revision, in.Revision)}
}

// ReplayName is the consumer through which a node reads its intents back at
// start-up. Its name is fixed, not generated, so that a node's NATS
// permissions can name it (docs/security.md).
func ReplayName(node string) string { return DurableName(node) + "-replay" }

// replayConsumer creates the node's replay consumer afresh: one left behind
// by a jetlet that died has delivered part of the stream already. A denied
// delete or create is permanent: retrying cannot mend the permissions.
func (c *Consumer) replayConsumer(ctx context.Context, filter string) (jetstream.Consumer, error) {
	name := ReplayName(c.cfg.Node)
	api := func(verb string) string { return "$JS.API.CONSUMER." + verb + "." + schemas.StreamIntents + "." + name }
	err := c.unlessDenied(ctx, api("DELETE"), func(ctx context.Context) error {
		return c.js.DeleteConsumer(ctx, schemas.StreamIntents, name)
	})
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, permanentIfDenied(fmt.Errorf("delete the old replay consumer %s: %w", name, err))
	}
	var cons jetstream.Consumer
	err = c.unlessDenied(ctx, api("CREATE"), func(ctx context.Context) (err error) {
		cons, err = c.js.CreateConsumer(ctx, schemas.StreamIntents, jetstream.ConsumerConfig{
			Name:          name,
			FilterSubject: filter, // in the create request's subject, where permissions see it
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckNonePolicy,
			MemoryStorage: true,
			// The server removes it should the delete after the replay not arrive.
			InactiveThreshold: time.Minute,
		})
		return err
	})
	return cons, permanentIfDenied(err)
}

func permanentIfDenied(err error) error {
	var denied *events.PermissionError
	if errors.As(err, &denied) {
		return backoff.Permanent(err)
	}
	return err
}
