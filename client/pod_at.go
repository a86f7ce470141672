package client

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// resultLag bounds how long after it finished a result is stored: a read
// of the state at T stops at the first result stored after T plus this.
const resultLag = time.Minute

// errReadEnough ends a read of a stream early: what follows is past what it
// wants.
var errReadEnough = errors.New("read enough")

// PodAt is a pod as the results stream tells it at a moment: the status its
// newest result finished by then carried, and whether that result deleted
// it.
type PodAt struct {
	Status   schemas.PodStatus
	Deleted  bool
	finished time.Time // when that result finished
	seq      uint64    // and its stream sequence
}

// PodsAt returns each pod of node ("" for every node) as it was at at,
// keyed by schemas.StatusKey: from its newest result that finished by then
// and carried a status (a delete that finished with none leaves only the
// pod's name and Terminated). It reads JETLET_RESULTS from the start up to
// the first result stored a minute after at.
func (c *Client) PodsAt(ctx context.Context, node string, at time.Time) (map[string]*PodAt, error) {
	return c.podsAt(ctx, c.subj.Result(nodeToken(node), "*"), at)
}

func (c *Client) podsAt(ctx context.Context, filter string, at time.Time) (map[string]*PodAt, error) {
	pods := map[string]*PodAt{}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	err := c.readStream(ctx, schemas.StreamResults, cfg, false, func(msg jetstream.Msg) error {
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		if md.Timestamp.After(at.Add(resultLag)) {
			return errReadEnough
		}
		res, _, ok := decodeResult(msg)
		if !ok || res.FinishedAt.IsZero() || res.FinishedAt.After(at) {
			return nil
		}
		deleted := res.Op == schemas.OpDelete && res.Outcome == schemas.OutcomeSynced
		if res.Status == nil && !deleted {
			return nil // nothing said of the pod's state
		}
		key := schemas.StatusKey(res.Node, res.UID)
		prev := pods[key]
		if prev != nil && !newerResult(&res, md.Sequence.Stream, prev) {
			return nil
		}
		p := &PodAt{Deleted: deleted, finished: res.FinishedAt, seq: md.Sequence.Stream}
		if res.Status != nil {
			p.Status = *res.Status
		} else {
			p.Status = schemas.PodStatus{UID: res.UID, Namespace: res.Namespace, Name: res.Name, Node: res.Node,
				Revision: res.Revision, IntentSeq: res.IntentSeq, ObservedAt: res.FinishedAt}
		}
		if deleted {
			p.Status.Phase = schemas.PhaseTerminated
		}
		pods[key] = p
		return nil
	})
	if err != nil && !errors.Is(err, errReadEnough) {
		return nil, err
	}
	return pods, nil
}

// newerResult says whether res (stored at seq) finished after what p holds,
// or at the same time and was stored later.
func newerResult(res *schemas.SyncResult, seq uint64, p *PodAt) bool {
	if !res.FinishedAt.Equal(p.finished) {
		return res.FinishedAt.After(p.finished)
	}
	return seq > p.seq
}

// PodThen is p as it was at at: the status PodsAt finds for it (none when
// it had no result by then), and a delete intent when it was deleted.
func (c *Client) PodThen(ctx context.Context, p *Pod, at time.Time) (*Pod, error) {
	pods, err := c.podsAt(ctx, c.subj.Result(p.Node, p.UID), at)
	if err != nil {
		return nil, err
	}
	then := *p
	then.Status, then.LastIntent = nil, nil
	if pa := pods[schemas.StatusKey(p.Node, p.UID)]; pa != nil {
		then.Status = &pa.Status
		if pa.Deleted {
			then.LastIntent = &IntentRecord{Node: p.Node, UID: p.UID, Op: schemas.OpDelete, Seq: pa.Status.IntentSeq}
		}
	}
	return &then, nil
}
