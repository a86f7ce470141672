package jetlettest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/poll"
)

// Provision creates the contract's streams and buckets on js, with their
// defaults changed by each of mods, failing the test if it cannot.
func Provision(t testing.TB, js jetstream.JetStream, mods ...func(*natsjs.StreamsConfig)) {
	t.Helper()
	var cfg natsjs.StreamsConfig
	cfg.SetDefaults()
	for _, mod := range mods {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
}

// readers keeps one ordered consumer per connection, stream and filter, so
// that a test polling a stream reads only what is new each time.
var readers sync.Map // readerKey → *reader

type readerKey struct {
	js             jetstream.JetStream
	stream, filter string
}

type reader struct {
	mu   sync.Mutex
	oc   jetstream.Consumer
	msgs [][]byte
}

// ReadAll returns every message on filter now in the stream, in order,
// decoded from JSON as T.
func ReadAll[T any](js jetstream.JetStream, stream, filter string) ([]T, error) {
	v, _ := readers.LoadOrStore(readerKey{js, stream, filter}, &reader{})
	r := v.(*reader)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.oc == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		if r.oc, err = s.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}); err != nil {
			return nil, err
		}
	}
	for {
		batch, err := r.oc.FetchNoWait(500)
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			r.msgs = append(r.msgs, m.Data())
		}
		if got == 0 {
			break
		}
	}
	out := make([]T, 0, len(r.msgs))
	for _, data := range r.msgs {
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", stream, filter, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// WaitDuplicateWindow returns once the stream that stores subject has
// forgotten the Nats-Msg-Id of every message stored before the call, by its
// own clock: a probe published on subject with a fresh id is reported a
// duplicate until then (the server forgets ids oldest first). Each try
// after the window stores one probe message on subject.
func WaitDuplicateWindow(t testing.TB, js jetstream.JetStream, subject string, timeout time.Duration) {
	t.Helper()
	id := fmt.Sprintf("window-probe.%d", time.Now().UnixNano())
	probe := func() *jetstream.PubAck {
		ack, err := js.Publish(t.Context(), subject, nil, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatalf("probe the duplicate window: %v", err)
		}
		return ack
	}
	probe()
	poll.Until(t, timeout, poll.Msg("the duplicate window to expire"), func() bool { return !probe().Duplicate })
}

// Republish sends msg again exactly as it was sent (subject, headers, body),
// as a copy the servers held back would arrive, and returns JetStream's
// refusal, nil when it stored (or deduplicated) it.
func Republish(nc *nats.Conn, msg *nats.Msg) error {
	reply, err := nc.RequestMsg(&nats.Msg{Subject: msg.Subject, Header: msg.Header, Data: msg.Data}, 5*time.Second)
	if err != nil {
		return err
	}
	var ack struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return err
	}
	if ack.Error != nil {
		return ack.Error
	}
	return nil
}
