package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// ErrIntentPartitions is wrapped by CheckIntentPartitions's error: the
// intents are stored in another number of streams than asked for.
var ErrIntentPartitions = errors.New("intent partitions differ")

// IntentPartitions finds how the intents are stored: 1 when JETLET_INTENTS
// holds them, else the number of partitions JETLET_INTENTS_0's metadata
// gives. Neither stream found is jetstream.ErrStreamNotFound.
func IntentPartitions(ctx context.Context, js jetstream.JetStream) (int, error) {
	_, err := js.Stream(ctx, schemas.StreamIntents)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return 1, err
	}
	first := schemas.IntentsPartitionStream(0)
	s, err := js.Stream(ctx, first)
	if err != nil {
		return 0, err
	}
	v := s.CachedInfo().Config.Metadata[schemas.MetadataIntentPartitions]
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > schemas.MaxIntentPartitions {
		return 0, fmt.Errorf("stream %s: metadata %s is %q, not a number of partitions", first, schemas.MetadataIntentPartitions, v)
	}
	return n, nil
}

// CheckIntentPartitions fails with ErrIntentPartitions when intents are
// already stored in another number of streams than n: moving them is not
// done in place (docs/scaling.md). No intents stream at all is fine.
func CheckIntentPartitions(ctx context.Context, js jetstream.JetStream, n int) error {
	have, err := IntentPartitions(ctx, js)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("intents streams: %w", err)
	case have != n:
		return fmt.Errorf("%w: the intents are kept in %d partition(s), from stream %s, not in the %d --intent-partitions asks for: run with --intent-partitions %d, or provision a new fleet (docs/scaling.md)",
			ErrIntentPartitions, have, schemas.IntentsStreams(have)[0], n, have)
	}
	return nil
}
