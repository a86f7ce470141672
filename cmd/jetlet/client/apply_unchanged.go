package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/jetlet/jetlet/schemas"
)

// exitNodeNotLive is apply --wait's exit status when a pod's node has no live
// heartbeat: its intent is published, but no result can be awaited.
const exitNodeNotLive = 3

// intentPod reads the pod of node's intent stored at seq; nil when the body
// holds no pod jetlet could read (it was Rejected).
func (c *client) intentPod(ctx context.Context, node string, seq uint64) (*corev1.Pod, error) {
	body, err := c.intentBody(ctx, node, seq)
	if err != nil {
		return nil, err
	}
	return podOf(body), nil
}

// intentBody reads the body of node's intent stored at seq. The read rides
// out an election: a read sent to a server that died never answers.
func (c *client) intentBody(ctx context.Context, node string, seq uint64) ([]byte, error) {
	stream, err := c.intentsStream(ctx, node)
	if err != nil {
		return nil, err
	}
	what := "stream " + stream
	var msg *jetstream.RawStreamMsg
	err = c.ridingOut(ctx, what, func(ctx context.Context) error {
		s, err := c.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		msg, err = s.GetMsg(ctx, seq)
		return err
	})
	if err != nil {
		return nil, c.jsError(what, err)
	}
	return msg.Data, nil
}

// podOf is the pod of an intent body, or nil.
func podOf(body []byte) *corev1.Pod {
	var in struct {
		Pod *corev1.Pod `json:"pod"`
	}
	if json.Unmarshal(body, &in) != nil {
		return nil
	}
	return in.Pod
}

// samePod reports whether two pods are the same desired state: metadata and
// spec equal once decoded and defaulted as the node defaults them, so that
// `restartPolicy: Always` written out or left to its default, "1000m" or "1"
// CPU, and an empty or absent list are alike. Status is ignored, as the node
// ignores it.
func samePod(a, b *corev1.Pod) bool {
	if a == nil || b == nil {
		return false
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	schemas.SetPodDefaults(a)
	schemas.SetPodDefaults(b)
	return equality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta) && equality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// unchanged reports whether pi, an apply, would carry the pod of the newest
// intent for its node and uid: the one planned earlier in this apply, else
// the newest kept in JETLET_INTENTS (as describe and history read it). When
// it would, pi takes that intent's revision and sequence, to be reported.
func (p *planner) unchanged(ctx context.Context, pi *plannedIntent, prev *plannedIntent) (bool, error) {
	if pi.op != schemas.OpApply {
		return false, nil
	}
	want := podOf(pi.body)
	if prev != nil && prev.uid == pi.uid {
		// Unchanged only if the earlier document was: one to be published
		// has no sequence yet to point at.
		if !prev.unchanged || !samePod(want, podOf(prev.body)) {
			return false, nil
		}
		pi.revision, pi.seq = prev.revision, prev.seq
		return true, nil
	}
	pods, err := p.known(ctx, pi.node)
	if err != nil {
		return false, err
	}
	var last *intentRecord
	for _, r := range pods {
		if r.UID == pi.uid {
			last = r.LastIntent
		}
	}
	if last == nil || last.Op != schemas.OpApply {
		return false, nil
	}
	have, err := p.c.intentPod(ctx, pi.node, last.Seq)
	if err != nil || !samePod(want, have) {
		return false, err
	}
	pi.revision, pi.seq = last.Revision, last.Seq
	return true, nil
}

// checkNodesLive warns on w of each node of plans (those to be published)
// with no live heartbeat in jetlet_nodes, and marks its plans so that --wait
// does not wait for a result that cannot come.
func checkNodesLive(ctx context.Context, c *client, plans []*plannedIntent, w io.Writer) error {
	now := time.Now()
	down := map[string]string{} // node → why it is not live ("" when live)
	for _, pi := range plans {
		if pi.unchanged {
			continue
		}
		why, seen := down[pi.node]
		if !seen {
			states, err := c.nodeStates(ctx, pi.node, nil)
			if err != nil {
				return err
			}
			why = notLive(states[pi.node], now)
			down[pi.node] = why
			if why != "" {
				fmt.Fprintf(w, "warning: node %s has no live heartbeat in %s (%s): its intents wait in %s until its jetlet runs\n",
					pi.node, schemas.BucketNodes, why, schemas.StreamIntents)
			}
		}
		pi.nodeDown = why
	}
	return nil
}

// notLive says why a node is not live, or "" when it is.
func notLive(n *nodeState, now time.Time) string {
	switch {
	case n == nil:
		return "never seen"
	case n.live(now):
		return ""
	case n.Record != nil:
		return "last heartbeat " + n.heartbeat(now)
	case !n.StoppedAt.IsZero():
		return "stopped: record " + n.heartbeat(now)
	}
	return "record expired"
}
