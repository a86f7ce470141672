package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/events"
)

// registerStreamFlags registers the flags that size the streams and buckets,
// shared by `jetlet run` and `jetlet provision` (the subject prefix is each
// command's own flag).
func registerStreamFlags(fs *pflag.FlagSet, c *events.StreamsConfig) {
	fs.IntVar(&c.Replicas, "replicas", 1, "replicas of the streams and buckets jetlet creates")
	fs.Int64Var(&c.IntentHistory, "intent-history", 16, "intents kept per pod in JETLET_INTENTS")
	fs.DurationVar(&c.MaxAge, "max-age", 7*24*time.Hour, "max age of results, events and dead letters")
	fs.DurationVar(&c.DuplicateWindow, "duplicate-window", 2*time.Minute, "Nats-Msg-Id dedupe window of intents, results and events")
	fs.DurationVar(&c.NodeTTL, "node-ttl", time.Minute, "how long a node's heartbeat outlives it in jetlet_nodes")
	fs.DurationVar(&c.TerminatedStatusTTL, "terminated-status-ttl", time.Hour, "how long the Terminated status of a deleted pod stays in jetlet_status")
}

// provisionAPI is the prefix of the JetStream API calls that create and
// update streams (a bucket is a stream), which a node's permissions lack.
const provisionAPI = "$JS.API.STREAM"

func newDeniedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jetlet_permission_denied_total",
		Help: "Publishes and subscriptions NATS refused this node, by what they carry (result, event, dead, status, heartbeat, intent, consumer, stream, other).",
	}, []string{"what"})
	for _, what := range events.PermissionKinds {
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
func (a *agent) denied(pe *events.PermissionError) {
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
		watchCtx, stop := a.denials.Watch(attemptCtx, provisionAPI)
		defer stop()
		err := events.Provision(watchCtx, js, a.cfg.streams, log)
		if denied, ok := events.Denied(watchCtx); ok {
			return backoff.Permanent(a.checkProvisioned(attemptCtx, js, denied))
		}
		if errors.Is(err, events.ErrReplicasUnavailable) {
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
func (a *agent) checkProvisioned(ctx context.Context, js jetstream.JetStream, denied *events.PermissionError) error {
	missing, err := events.Missing(ctx, js, a.cfg.streams)
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

type provisionOptions struct {
	client  clientFlags
	streams events.StreamsConfig
	timeout time.Duration
}

func newProvisionCommand() *cobra.Command {
	var o provisionOptions
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create or update jetlet's streams and buckets (with operator credentials)",
		Long: `Create the streams and buckets of CONTRACT.md section 2, or update the
ones whose settings differ, as ` + "`jetlet run`" + ` does at start. Where the nodes'
NATS credentials may not create streams (the permissions of jetlet
nats-config), run it once with the operator's, with the same settings as the
nodes (--replicas, --max-age, ...); the nodes then check that they exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	registerStreamFlags(fs, &o.streams)
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for NATS")
	annotateEnv(fs)
	return cmd
}

func (o *provisionOptions) run(cmd *cobra.Command) error {
	o.streams.SubjectPrefix = o.client.subjectPrefix
	o.streams.SetDefaults()
	if err := o.streams.Validate(); err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	watchCtx, stop := c.denied.Watch(ctx, provisionAPI)
	defer stop()
	err = events.Provision(watchCtx, c.js, o.streams, logger)
	if denied, ok := events.Denied(watchCtx); ok {
		return fmt.Errorf("NATS at %s denied these credentials %s: provisioning needs the operator's (the operator user of `jetlet nats-config`)", c.url, denied.Subject)
	}
	if err != nil {
		return err
	}
	var names []string
	for _, sc := range o.streams.StreamConfigs() {
		names = append(names, sc.Name)
	}
	for _, kc := range o.streams.BucketConfigs() {
		names = append(names, kc.Bucket)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "provisioned at %s: %s\n", c.url, strings.Join(names, ", "))
	return nil
}
