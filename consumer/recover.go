package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/schemas"
)

// recover rebuilds every pod's desired state before any intent is consumed,
// then queues a sync of each pod, so that a restarted jetlet adopts what runs
// (without restarting what still matches its intent) and kills what no intent
// wants any more.
//
// The desired state is what the pod workers would have reached: the intents
// the stream keeps for this node are replayed in order through the same
// decision as live ones (newest valid, not stale), without answering them;
// unanswered ones are redelivered by the durable consumer and answered then.
func (c *Consumer) recover(ctx context.Context) error {
	start := time.Now()
	replayed, err := c.replay(ctx)
	if err != nil {
		return fmt.Errorf("replay intents: %w", err)
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
		p.known, p.wake = true, true
		c.scheduleLocked(p)
	}
	pods := len(c.pods)
	c.mu.Unlock()
	c.log.Info().Int("intents", replayed).Int("pods", pods).Int("running", len(running)).Int("orphans", orphans).
		Dur("took", time.Since(start)).Msg("desired state recovered; syncing every pod")
	return nil
}

// replay reads every intent kept for this node, oldest first, and sets each
// pod's desired state and highest revision. It returns how many it read.
func (c *Consumer) replay(ctx context.Context) (int, error) {
	stream, err := c.js.Stream(ctx, schemas.StreamIntents)
	if err != nil {
		return 0, err
	}
	filter := c.subj.NodeIntents(c.cfg.Node)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	if len(info.State.Subjects) == 0 {
		return 0, nil
	}
	oc, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return 0, err
	}
	read := 0
	for {
		batch, err := oc.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return read, err
		}
		got, last := 0, false
		for msg := range batch.Messages() {
			got++
			read++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			c.replayOne(msg, meta)
			last = meta.NumPending == 0
		}
		if err := batch.Error(); err != nil {
			return read, err
		}
		if last || got == 0 {
			return read, nil
		}
	}
}

func (c *Consumer) replayOne(msg jetstream.Msg, meta *jetstream.MsgMetadata) {
	uid, ok := c.subj.IntentUID(msg.Subject(), c.cfg.Node)
	if !ok {
		return
	}
	in, err := schemas.DecodeIntent(msg.Data(), schemas.IntentTarget{
		Node: c.cfg.Node, UID: uid, MaxBodyBytes: c.cfg.MaxIntentBytes, AllowPrivileged: c.cfg.AllowPrivileged,
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.podLocked(uid)
	if _, apply := decide([]candidate{{seq: meta.Sequence.Stream, intent: in, err: err}}, p.done); apply < 0 {
		if p.desired == nil {
			delete(c.pods, uid) // never had a valid intent
		}
		return
	}
	p.desired = &Desired{UID: uid, Intent: in, IntentSeq: meta.Sequence.Stream, ReceivedAt: meta.Timestamp}
	p.done = applied{seq: meta.Sequence.Stream, revision: max(p.done.revision, in.Revision)}
}
