package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

func newDeniedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jetlet_permission_denied_total",
		Help: "Publishes and subscriptions NATS refused this node, by what they carry (result, event, dead, status, heartbeat, intent, consumer, stream, other).",
	}, []string{"what"})
	for _, what := range natsjs.PermissionKinds {
		c.WithLabelValues(what) // present at 0 from the start
	}
	reg.MustRegister(c)
	return c
}

// denied reports a permission NATS refused in jetlet_permission_denied_total
// and to the call waiting on it, which then fails at once instead of at its
// timeout and handles it (provisioning, attaching the durable consumer).
// Any other denial is logged at error with its subject: a publish that is
// retried is refused, and so reported, at every try.
func (a *agent) denied(pe *natsjs.PermissionError) {
	what := pe.What(a.cfg.streams.SubjectPrefix)
	a.deniedTotal.WithLabelValues(what).Inc()
	if a.denials.Observe(pe) {
		a.log.Debug().Str("op", pe.Op).Str("subject", pe.Subject).Msg("NATS denied a call that has a way around it")
		return
	}
	a.log.Error().Str("op", pe.Op).Str("subject", pe.Subject).Str("what", what).
		Msg("NATS denied this node's credentials a permission it needs; give the node the permissions of `jetlet nats-config` (docs/security.md)")
}

// provision creates or updates the streams and buckets, retrying while NATS
// is not reachable yet; replicas NATS cannot give end the run. With node
// credentials, which may not create or update them, it checks that they
// exist instead and ends the run naming what is missing.
func (a *agent) provision(ctx context.Context, js jetstream.JetStream) error {
	log := logger.With().Str("component", "provision").Logger()
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(10*time.Second)), ctx)
	err := backoff.RetryNotify(func() error {
		attemptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		watchCtx, stop := a.denials.Watch(attemptCtx, cli.ProvisionAPI)
		defer stop()
		err := natsjs.Provision(watchCtx, js, a.cfg.streams, log)
		if denied, ok := natsjs.Denied(watchCtx); ok {
			return backoff.Permanent(a.checkProvisioned(attemptCtx, js, denied))
		}
		if errors.Is(err, natsjs.ErrReplicasUnavailable) {
			return backoff.Permanent(err) // --replicas needs changing, or a cluster
		}
		return err
	}, b, func(err error, next time.Duration) {
		log.Warn().Err(err).Dur("retry_in_ms", next).Msg("provisioning streams and buckets failed; retrying")
	})
	if err != nil {
		return err
	}
	a.provisioned.Store(true)
	log.Info().Msg("streams and buckets provisioned")
	return nil
}

// checkProvisioned is provisioning with credentials that may not create or
// update streams: every stream and bucket must exist already, as they are.
func (a *agent) checkProvisioned(ctx context.Context, js jetstream.JetStream, denied *natsjs.PermissionError) error {
	missing, err := natsjs.Missing(ctx, js, a.cfg.streams)
	if err != nil {
		return fmt.Errorf("NATS denied creating or updating the streams and buckets (%s), and looking them up failed: %w", denied.Subject, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s missing, and these NATS credentials may not create them (denied %s): run `jetlet provision` once with the operator's credentials (docs/security.md)",
			strings.Join(missing, ", "), denied.Subject)
	}
	a.log.Warn().Str("denied", denied.Subject).
		Msg("these NATS credentials may not create or update streams: the streams and buckets exist and are used as they are (`jetlet provision` applies new settings)")
	return nil
}
