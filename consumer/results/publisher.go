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
	"github.com/jetlet/jetlet/schemas/bus"
)

// Config configures a ResultPublisher.
type Config struct {
	// Node is the node whose intents are answered; its results are
	// <prefix>.result.<node>.<uid>.
	Node          string
	SubjectPrefix string
	// Failures counts the results not stored under kind "result"
	// (bus.NewPublishFailures; default: registered nowhere).
	Failures *prometheus.CounterVec
	// Denials ends at once a read-back NATS denies; nil leaves it to its
	// timeout.
	Denials *bus.Denials
}

// SetDefaults fills what is unset.
func (c *Config) SetDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if c.Failures == nil {
		c.Failures = bus.NewPublishFailures(nil)
	}
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = bus.ErrInvalidConfig

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	return cmp.Or(bus.CheckNode(c.Node), bus.CheckSubjectPrefix(c.SubjectPrefix))
}

// ResultPublisher stores the results of one node's intents and reads back
// which are stored. A result is published synchronously: the caller acks
// its intent only once the result is stored.
type ResultPublisher struct {
	js   jetstream.JetStream
	cfg  Config
	subj schemas.Subjects

	// readBackMu makes one read-back at a time: its consumer's name is
	// fixed (bus.ResultsReadBackName).
	readBackMu sync.Mutex
}

// New returns a ResultPublisher; it does no I/O.
func New(js jetstream.JetStream, cfg Config) (*ResultPublisher, error) {
	if err := bus.Prepare(js, &cfg); err != nil {
		return nil, err
	}
	return &ResultPublisher{js: js, cfg: cfg, subj: schemas.Subjects{Prefix: cfg.SubjectPrefix}}, nil
}

// PublishResult stores the result of an intent and returns once JetStream has
// acknowledged it. Its Nats-Msg-Id is <node>.<intent seq>, so the result of a
// redelivered intent is stored once. ctx carries the intent's trace context.
func (p *ResultPublisher) PublishResult(ctx context.Context, r *schemas.SyncResult) error {
	r.APIVersion, r.Kind = schemas.APIVersion, schemas.KindSyncResult
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	msg := nats.NewMsg(p.subj.Result(p.cfg.Node, r.UID))
	msg.Data = data
	msg.Header.Set(schemas.HeaderIntentSeq, strconv.FormatUint(r.IntentSeq, 10))
	bus.InjectTrace(ctx, msg.Header)
	if _, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(schemas.ResultMsgID(p.cfg.Node, r.IntentSeq))); err != nil {
		p.cfg.Failures.WithLabelValues("result").Inc()
		return fmt.Errorf("publish result of intent %d: %w", r.IntentSeq, err)
	}
	return nil
}

// ResultsStored returns the intent sequences answered by the results stored
// for pod uid of this node ("" for every pod) at or after since, reading
// only their headers through the node's results read-back consumer, one
// read at a time (its name is fixed).
func (p *ResultPublisher) ResultsStored(ctx context.Context, uid string, since time.Time) (map[uint64]bool, error) {
	if uid == "" {
		uid = "*"
	}
	p.readBackMu.Lock()
	defer p.readBackMu.Unlock()
	name := bus.ResultsReadBackName(p.cfg.Node)
	cons, err := bus.CreateReadBack(ctx, p.js, p.cfg.Denials, schemas.StreamResults, jetstream.ConsumerConfig{
		Name:          name,
		FilterSubject: p.subj.Result(p.cfg.Node, uid),
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &since,
		HeadersOnly:   true,
	})
	if err != nil {
		return nil, err
	}
	defer bus.DeleteReadBack(ctx, p.js, schemas.StreamResults, name)
	pending := cons.CachedInfo().NumPending
	answered := make(map[uint64]bool, pending)
	for left := pending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		got := uint64(0)
		for m := range batch.Messages() {
			got++
			if seq, err := strconv.ParseUint(m.Headers().Get(schemas.HeaderIntentSeq), 10, 64); err == nil {
				answered[seq] = true
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			break // aged out meanwhile
		}
		left -= min(got, left)
	}
	return answered, nil
}
