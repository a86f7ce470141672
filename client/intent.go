package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
)

// Intent is one PodIntent for one node, ready to publish, and once
// published, where it was stored.
type Intent struct {
	Node     string
	UID      string
	Op       schemas.Op
	Revision int64
	// Body is the PodIntent as published (JSON).
	Body []byte
	// Seq is its sequence in its stream, once published.
	Seq uint64
	// Duplicate: the same intent was already stored (the same Nats-Msg-Id
	// within the stream's duplicate window) and was not stored again.
	Duplicate bool
	// Unchanged: planned (Planner.Plan), the pod equals that of its newest
	// intent: there is nothing to publish, and Revision and Seq are that
	// intent's. Publish skips it; Wait waits for that intent's result.
	Unchanged bool
	// after are the results and events streams' last sequences before it
	// was published (marked: Publish took them): Wait reads from there.
	after  streamMarks
	marked bool
}

// NewIntent checks body, a PodIntent, exactly as the node will for node and
// uid, and returns it ready to publish; an invalid one is an *InvalidError.
func NewIntent(node, uid string, body []byte) (*Intent, error) {
	if reasons := ValidateIntent(body, node, uid); reasons != nil {
		return nil, &InvalidError{Reasons: reasons}
	}
	var li looseIntent
	_ = json.Unmarshal(body, &li)
	op := li.Op
	if op == "" {
		op = schemas.OpApply
	}
	return &Intent{Node: node, UID: uid, Op: op, Revision: li.Revision, Body: body}, nil
}

// ApplyIntent is the intent that runs pod on node at revision; the pod's
// uid must be set.
func ApplyIntent(node string, pod *corev1.Pod, revision int64) (*Intent, error) {
	body, err := json.Marshal(schemas.PodIntent{APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Op: schemas.OpApply, Revision: revision, Pod: pod})
	if err != nil {
		return nil, err
	}
	return NewIntent(node, string(pod.UID), body)
}

// DeleteIntent is the intent that deletes pod p at revision, with grace
// seconds before its containers are killed (nil: the pod's own).
func DeleteIntent(p *Pod, revision int64, grace *int64) (*Intent, error) {
	intent := map[string]any{
		"apiVersion": schemas.APIVersion,
		"kind":       schemas.KindPodIntent,
		"op":         schemas.OpDelete,
		"revision":   revision,
		"pod": map[string]any{"metadata": map[string]any{
			"name": p.Name, "namespace": p.Namespace, "uid": p.UID,
		}},
	}
	if grace != nil {
		intent["gracePeriodSeconds"] = *grace
	}
	body, err := json.Marshal(intent)
	if err != nil {
		return nil, err
	}
	return NewIntent(p.Node, p.UID, body)
}

// InvalidError is an intent that fails the node's validation, one reason
// an entry in the words of a Rejected result. errors.Is(err, ErrInvalid)
// holds.
type InvalidError struct{ Reasons []string }

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid intent: %s", joinReasons(e.Reasons))
}
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func joinReasons(r []string) string {
	s := ""
	for i, x := range r {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}

// ValidateIntent checks an intent body exactly as the node will, and
// returns the problems in the words of a Rejected result, one per entry
// (nil when the intent is valid). Privileged containers are let through:
// only the node knows whether it runs with --allow-privileged.
func ValidateIntent(body []byte, node, uid string) []string {
	_, err := schemas.DecodeIntent(body, schemas.IntentTarget{Node: node, UID: uid})
	if err == nil {
		return nil
	}
	var list schemas.ValidationErrors
	if !errors.As(err, &list) {
		return []string{err.Error()}
	}
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.Error()
	}
	return out
}

// intentMsgID is the Nats-Msg-Id of an intent: the same intent published
// again within the stream's duplicate window (a retried publish) is stored
// once.
func intentMsgID(subject string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{'\n'})
	h.Write(body)
	return "jetlet-cli-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// label names the intent's pod in messages: pod/NAMESPACE/NAME.
func (in *Intent) label() string {
	var li struct {
		Pod struct {
			Metadata struct{ Name, Namespace string } `json:"metadata"`
		} `json:"pod"`
	}
	_ = json.Unmarshal(in.Body, &li)
	ns := li.Pod.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	return "pod/" + ns + "/" + li.Pod.Metadata.Name
}

// Publish stores the intent in its node's intents stream (the partition,
// when the intents are partitioned) with a Nats-Msg-Id made of its subject
// and body, so that a retry within the duplicate window is stored once; it
// sets in.Seq and in.Duplicate. The publish rides out a stream electing a
// leader.
func (c *Client) Publish(ctx context.Context, in *Intent) error {
	if in.Unchanged {
		return nil
	}
	label := in.label()
	subject := c.subj.Intent(in.Node, in.UID)
	stream, err := c.IntentsStream(ctx, in.Node)
	if err != nil {
		return fmt.Errorf("publish %s: %w", label, err)
	}
	// Results and events of this intent come after these sequences:
	// a Wait that reads from here misses none, even the fastest.
	if in.after, err = c.marks(ctx); err != nil {
		return err
	}
	in.marked = true
	msg := nats.NewMsg(subject)
	msg.Data = in.Body
	ctx, stop := c.denied.Watch(ctx, subject)
	defer stop()
	var ack *jetstream.PubAck
	err = c.ridingOut(ctx, "publish "+label, func(ctx context.Context) (err error) {
		ack, err = c.js.PublishMsg(ctx, msg,
			jetstream.WithMsgID(intentMsgID(subject, in.Body)),
			jetstream.WithExpectStream(stream))
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			// Only a stream's leader listens on its subjects: none answers
			// while it elects one, as none does when there is no stream.
			if _, infoErr := c.js.Stream(ctx, stream); !errors.Is(infoErr, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("%w: %s: %v", errStreamElecting, stream, err)
			}
		}
		return err
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			if stream != schemas.StreamIntents {
				return errorOf(ErrNotFound, err, "publish %s: no stream stores %s at %s, though %s exists: do the servers map the intents to their partitions (`jetlet nats-config --intent-partitions`, docs/scaling.md)?", label, subject, c.url, stream)
			}
			return errorOf(ErrNotFound, err, "publish %s: no stream stores %s at %s; start `jetlet run` once against this NATS to create the streams (or check --subject-prefix)", label, subject, c.url)
		}
		if denied, ok := c.deniedError(ctx, "publish "+label, "publishing intents takes the scheduler's"); ok {
			return denied
		}
		return fmt.Errorf("publish %s to %s: %w", label, subject, err)
	}
	in.Seq, in.Duplicate = ack.Sequence, ack.Duplicate
	return nil
}

// streamMarks are the last sequences of the results and events streams
// before an intent was published.
type streamMarks struct{ results, events uint64 }

func (c *Client) marks(ctx context.Context) (streamMarks, error) {
	var m streamMarks
	for name, seq := range map[string]*uint64{schemas.StreamResults: &m.results, schemas.StreamEvents: &m.events} {
		s, err := c.stream(ctx, name)
		if err != nil {
			return m, err
		}
		*seq = s.CachedInfo().State.LastSeq
	}
	return m, nil
}

// Apply publishes pod for node, planned as Planner.Plan plans it: its
// uid is the live pod's of its namespace and name on node, else a new
// one; its revision one above the highest the uid had; its namespace
// "default" when empty. An invalid intent is an *InvalidError, and nothing
// is published; a pod equal to its newest intent's is not published again
// (Unchanged).
func (c *Client) Apply(ctx context.Context, node string, pod *corev1.Pod) (*Intent, error) {
	data, err := json.Marshal(schemas.PodIntent{APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Op: schemas.OpApply, Pod: pod})
	if err != nil {
		return nil, err
	}
	var envelope map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&envelope); err != nil {
		return nil, err
	}
	in, err := c.NewPlanner().Plan(ctx, node, envelope)
	if err != nil {
		return nil, err
	}
	return in, c.Publish(ctx, in)
}

// Delete publishes the delete intent of pod p (from Pods, FindPods or
// GetPod) at its next revision, with grace seconds before its containers
// are killed (nil: the pod's own terminationGracePeriodSeconds).
func (c *Client) Delete(ctx context.Context, p *Pod, grace *int64) (*Intent, error) {
	revision, err := c.NextRevision(ctx, p)
	if err != nil {
		return nil, err
	}
	in, err := DeleteIntent(p, revision, grace)
	if err != nil {
		return nil, err
	}
	return in, c.Publish(ctx, in)
}

// IntentBody reads the body of node's intent stored at seq. The read rides
// out an election: a read sent to a server that died never answers.
func (c *Client) IntentBody(ctx context.Context, node string, seq uint64) ([]byte, error) {
	stream, err := c.IntentsStream(ctx, node)
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
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, errorOf(ErrNotFound, err, "%s: %v", what, err)
		}
		return nil, c.jsError(what, err)
	}
	return msg.Data, nil
}

// IntentPod reads the pod of node's intent stored at seq; nil when the body
// holds no pod jetlet could read (it was Rejected).
func (c *Client) IntentPod(ctx context.Context, node string, seq uint64) (*corev1.Pod, error) {
	body, err := c.IntentBody(ctx, node, seq)
	if err != nil {
		return nil, err
	}
	return PodOf(body), nil
}

// PodOf is the pod of an intent body, or nil.
func PodOf(body []byte) *corev1.Pod {
	var in struct {
		Pod *corev1.Pod `json:"pod"`
	}
	if json.Unmarshal(body, &in) != nil {
		return nil
	}
	return in.Pod
}
