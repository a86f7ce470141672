// Package results is where intents are answered: the SyncResult of each
// intent stored in JETLET_RESULTS, and, read back from it, which intents
// are answered already.
package results

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// Config configures a ResultPublisher.
type Config struct {
	// Node is the node whose intents are answered; its results are
	// <prefix>.result.<node>.<uid>.
	Node          string
	SubjectPrefix string
	// Failures counts the results not stored under kind "result"
	// (natsjs.NewPublishFailures; default: registered nowhere).
	Failures *prometheus.CounterVec
	// Denials ends at once a read NATS denies; nil leaves it to its
	// timeout.
	Denials *natsjs.Denials
}

// SetDefaults fills what is unset.
func (c *Config) SetDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if c.Failures == nil {
		c.Failures = natsjs.NewPublishFailures(nil)
	}
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = natsjs.ErrInvalidConfig

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	return cmp.Or(natsjs.CheckNode(c.Node), natsjs.CheckSubjectPrefix(c.SubjectPrefix))
}

// ResultPublisher stores the results of one node's intents and reads back
// which are stored. A result is published synchronously: the caller acks
// its intent only once the result is stored.
//
// # Exactly once, at any delay
//
// Nats-Msg-Id dedupes a result published twice within the stream's
// duplicate window. Beyond it, every result is published with
// Nats-Expected-Last-Subject-Sequence set to the sequence of its pod's last
// stored result, as this publisher knows it, and the stream's leader
// refuses it when that is no longer the pod's last. A copy that the servers
// queued past our timeout is therefore refused at any age once anything
// (that copy's twin included) was stored after what it expected.
//
// What is expected comes from this publisher's own acks, or from reading
// every result of the pod; a read may lag the leader (a replica answers),
// but the leader's check makes a stale expectation a refusal, never a second
// copy. A pod this publisher knows nothing of is first expected to have no
// result at all, which costs a new pod no read; a refusal then reads what is
// stored. The caller answers one pod's intents one at a time.
type ResultPublisher struct {
	js   jetstream.JetStream
	cfg  Config
	subj schemas.Subjects

	mu sync.Mutex
	// last is, per pod, the sequence of its last stored result as known;
	// absent when unknown (never learnt, or a publish's outcome is unknown).
	// Guarded by mu.
	last map[string]uint64
}

// New returns a ResultPublisher; it does no I/O.
func New(js jetstream.JetStream, cfg Config) (*ResultPublisher, error) {
	if err := natsjs.Prepare(js, &cfg); err != nil {
		return nil, err
	}
	return &ResultPublisher{js: js, cfg: cfg, subj: schemas.Subjects{Prefix: cfg.SubjectPrefix}, last: map[string]uint64{}}, nil
}

// refusalsRead bounds the refusals one PublishResult reads past before it
// fails (for its caller to retry later): each means a write to the pod's
// results was in flight or just stored.
const refusalsRead = 3

// PublishResult stores the result of an intent, unless it is stored
// already, and returns once JetStream has acknowledged it. Its Nats-Msg-Id
// is <node>.<intent seq>. ctx carries the intent's trace context.
func (p *ResultPublisher) PublishResult(ctx context.Context, r *schemas.SyncResult) error {
	r.APIVersion, r.Kind = schemas.APIVersion, schemas.KindSyncResult
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	for refusals := 0; ; refusals++ {
		expected := p.lastOf(r.UID)
		msg := nats.NewMsg(p.subj.Result(p.cfg.Node, r.UID))
		msg.Data = data
		msg.Header.Set(schemas.HeaderIntentSeq, strconv.FormatUint(r.IntentSeq, 10))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expected, 10))
		natsjs.InjectTrace(ctx, msg.Header)
		ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(schemas.ResultMsgID(p.cfg.Node, r.IntentSeq)))
		if err == nil {
			p.learn(r.UID, ack.Sequence)
			return nil
		}
		p.cfg.Failures.WithLabelValues("result").Inc()
		if !natsjs.WrongLastSequence(err) {
			p.Forget(r.UID) // a copy may yet be stored
			return fmt.Errorf("publish result of intent %d: %w", r.IntentSeq, err)
		}
		stored, err := p.readPod(ctx, r.UID)
		if err != nil {
			return fmt.Errorf("publish result of intent %d: refused, and %w", r.IntentSeq, err)
		}
		if stored[r.IntentSeq] {
			return nil
		}
		if refusals == refusalsRead {
			return fmt.Errorf("publish result of intent %d: refused %d times, pod %s's results changing meanwhile", r.IntentSeq, refusals+1, r.UID)
		}
	}
}

func (p *ResultPublisher) lastOf(uid string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[uid] // unknown: expect none
}

func (p *ResultPublisher) learn(uid string, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[uid] = seq
}

// Forget drops what is known of pod uid's results (a deleted pod's, or
// after a publish whose outcome is unknown): should it have another, it is
// read then.
func (p *ResultPublisher) Forget(uid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, uid)
}

// readPod reads every result of pod uid and learns the last one's sequence:
// the intents they answer.
func (p *ResultPublisher) readPod(ctx context.Context, uid string) (map[uint64]bool, error) {
	answered := map[uint64]bool{}
	last, err := natsjs.ReadStored(ctx, p.js, p.cfg.Denials, schemas.StreamResults, p.subj.Result(p.cfg.Node, uid), time.Time{}, collectIntentSeqs(answered))
	if err != nil {
		p.Forget(uid)
		return nil, err
	}
	p.learn(uid, last)
	return answered, nil
}

func collectIntentSeqs(into map[uint64]bool) func(*jetstream.RawStreamMsg) error {
	return func(m *jetstream.RawStreamMsg) error {
		if seq, err := strconv.ParseUint(m.Header.Get(schemas.HeaderIntentSeq), 10, 64); err == nil {
			into[seq] = true
		}
		return nil
	}
}

// PodAnswered returns the intents of pod uid that have their result
// stored, reading all of the pod's results with batched direct gets (no
// consumer), and learns the last one's sequence.
func (p *ResultPublisher) PodAnswered(ctx context.Context, uid string) (map[uint64]bool, error) {
	return p.readPod(ctx, uid)
}

// AnsweredSince returns the intents of every pod of this node answered by a
// result stored at or after since, reading with batched direct gets.
func (p *ResultPublisher) AnsweredSince(ctx context.Context, since time.Time) (map[uint64]bool, error) {
	answered := map[uint64]bool{}
	if _, err := natsjs.ReadStored(ctx, p.js, p.cfg.Denials, schemas.StreamResults, p.subj.Result(p.cfg.Node, "*"), since, collectIntentSeqs(answered)); err != nil {
		return nil, err
	}
	return answered, nil
}
