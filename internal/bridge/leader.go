package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection is how the bridges of one fleet choose the one that
// bridges: the holder of a coordination.k8s.io Lease, as kube-scheduler and
// kube-controller-manager do (client-go's leaderelection). The others wait.
type LeaderElection struct {
	// Enabled: without it the bridge bridges at once, as if alone.
	Enabled bool
	// LeaseDuration is how long a standby waits from the leader's last
	// renewal before it takes the Lease (default 15 s); RenewDeadline is
	// how long the leader tries to renew before it gives up leading
	// (10 s); RetryPeriod is the wait between tries (2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Namespace and Name are the Lease's (default kube-system and
	// jetlet-bridge).
	Namespace, Name string
}

// ErrLeadershipLost is Run's error when the bridge stopped holding the
// Lease: its process exits on it for its supervisor to start it again, a
// standby then, rather than stop its controllers half-way while another
// bridge leads.
var ErrLeadershipLost = errors.New("bridge: leaderelection lost")

func (l *LeaderElection) setDefaults() {
	if l.LeaseDuration == 0 {
		l.LeaseDuration = 15 * time.Second
	}
	if l.RenewDeadline == 0 {
		l.RenewDeadline = 10 * time.Second
	}
	if l.RetryPeriod == 0 {
		l.RetryPeriod = 2 * time.Second
	}
	if l.Namespace == "" {
		l.Namespace = metav1.NamespaceSystem
	}
	if l.Name == "" {
		l.Name = "jetlet-bridge"
	}
}

// validate holds client-go's rules, in the flags' names: the leader gives
// up before a standby may take over, after more than one try.
func (l *LeaderElection) validate() error {
	if !l.Enabled {
		return nil
	}
	switch {
	case l.RetryPeriod <= 0:
		return fmt.Errorf("bridge: --leader-elect-retry-period %s: must be positive", l.RetryPeriod)
	case l.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(l.RetryPeriod)):
		return fmt.Errorf("bridge: --leader-elect-renew-deadline %s: must be longer than --leader-elect-retry-period %s (times %v, its jitter)", l.RenewDeadline, l.RetryPeriod, leaderelection.JitterFactor)
	case l.LeaseDuration <= l.RenewDeadline:
		return fmt.Errorf("bridge: --leader-elect-lease-duration %s: must be longer than --leader-elect-renew-deadline %s", l.LeaseDuration, l.RenewDeadline)
	}
	return nil
}

// identity is this process's name in the Lease: the host's, made unique
// as client-go's components make it, so that two bridges of one host
// differ.
func identity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("bridge: the host name, for the leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// lead runs bridge while this process holds the Lease, once it does. It
// returns bridge's error, nil once ctx ends, and ErrLeadershipLost when
// the Lease is lost, without waiting for bridge: the process is to exit.
// Once ctx ends, the Lease is released after bridge returned, not before,
// so that a standby takes over at once without two bridges writing.
func (b *Bridge) lead(ctx context.Context, bridge func(context.Context) error) error {
	l := b.cfg.LeaderElection
	lease := l.Namespace + "/" + l.Name
	log := zerolog.Ctx(ctx)
	log.Info().Str("identity", b.identity).Str("lease", lease).Msg("electing a leader")
	electing, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	ran := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
			Client:     b.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: b.identity},
		},
		LeaseDuration: l.LeaseDuration, RenewDeadline: l.RenewDeadline, RetryPeriod: l.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            eventSource,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				log.Info().Str("lease", lease).Msg("leading: bridging")
				leading, stop := context.WithCancel(leading)
				defer stop()
				defer context.AfterFunc(ctx, stop)()
				ran <- bridge(leading)
				stopElecting()
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				if id != b.identity {
					log.Info().Str("leader", id).Msg("standing by: another bridge leads")
				}
			},
		},
	})
	if err != nil {
		return err
	}
	// A standby stops electing when ctx ends; a leader once its bridge
	// returned.
	defer context.AfterFunc(ctx, func() {
		if !le.IsLeader() {
			stopElecting()
		}
	})()
	le.Run(electing)
	select {
	case err := <-ran:
		if err != nil || ctx.Err() != nil {
			return err
		}
	default:
		if ctx.Err() != nil {
			return nil
		}
	}
	return ErrLeadershipLost
}
