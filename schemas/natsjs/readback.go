package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CreateReadBack creates the consumer cfg.Name on stream for a one-off read
// (a node's replay of its intents at start-up): no acks, in memory, and removed by the
// server a minute after its last use should the reader's DeleteReadBack not
// arrive. Its name is fixed (names.go) and its one filter, cfg.FilterSubject,
// goes in the create request's subject, so that a node's permissions can
// name both. One left behind by a jetlet that died, which may have delivered
// part of the stream already, is deleted and created afresh. A create or
// delete that NATS denies fails at once with the *PermissionError (denials
// may be nil).
func CreateReadBack(ctx context.Context, js jetstream.JetStream, denials *Denials, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cfg.AckPolicy, cfg.MemoryStorage, cfg.InactiveThreshold = jetstream.AckNonePolicy, true, time.Minute
	api := func(verb string) string { return "$JS.API.CONSUMER." + verb + "." + stream + "." + cfg.Name }
	create := func() (cons jetstream.Consumer, err error) {
		err = UnlessDenied(ctx, denials, api("CREATE"), func(ctx context.Context) error {
			cons, err = js.CreateConsumer(ctx, stream, cfg)
			return err
		})
		return cons, err
	}
	cons, err := create()
	if errors.Is(err, jetstream.ErrConsumerExists) || err == nil && cons.CachedInfo().Delivered.Consumer > 0 {
		err = UnlessDenied(ctx, denials, api("DELETE"), func(ctx context.Context) error {
			return js.DeleteConsumer(ctx, stream, cfg.Name)
		})
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("delete the old read-back consumer %s: %w", cfg.Name, err)
		}
		cons, err = create()
	}
	if err != nil {
		return nil, fmt.Errorf("read-back consumer %s: %w", cfg.Name, err)
	}
	return cons, nil
}

// DeleteReadBack deletes a read-back consumer once read, even when ctx is
// done.
func DeleteReadBack(ctx context.Context, js jetstream.JetStream, stream, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, name)
}

// UnlessDenied runs call, ending it at once with the *PermissionError when
// NATS denies a publish to subject (or below it) meanwhile.
func UnlessDenied(ctx context.Context, denials *Denials, subject string, call func(context.Context) error) error {
	watchCtx, stop := denials.Watch(ctx, subject)
	defer stop()
	err := call(watchCtx)
	if denied, ok := Denied(watchCtx); ok {
		return denied
	}
	return err
}
