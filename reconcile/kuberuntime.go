package reconcile

import (
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/pullmanager"
	"github.com/jetlet/jetlet/reconcile/userns"
)

// Kuberuntime is jetlet's kuberuntime manager (kubelet's
// kubeGenericRuntimeManager): it syncs pods to a Runtime, kills them, reads
// their status from it and collects their garbage. It is safe for concurrent
// use by several pod workers as long as each pod is synced by one worker at a
// time (as kubelet's pod workers guarantee).
type Kuberuntime struct {
	rt           Runtime
	emit         kubecontainer.Emitter
	cfg          Config
	log          zerolog.Logger
	backOff      *Backoff
	imageBackOff *Backoff
	reasons      *reasonCache
	cache        *statusCache
	podResources *podResourcesCache
	userns       *userns.Allocator
}

// New returns a Kuberuntime. It does no I/O.
func New(rt Runtime, emit kubecontainer.Emitter, cfg Config) (*Kuberuntime, error) {
	if rt == nil {
		return nil, fmt.Errorf("%w: nil Runtime", ErrInvalidConfig)
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: nil Emitter", ErrInvalidConfig)
	}
	cfg.setDefaults()
	err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	if cfg.ImagePulls == nil {
		if cfg.ImagePulls, err = pullmanager.New(pullmanager.Config{Dir: filepath.Join(cfg.DataDir, pullmanager.DirName), Logger: cfg.Logger}); err != nil {
			return nil, err
		}
	}
	ns, err := userns.NewAllocator(filepath.Join(cfg.DataDir, "pods"), cfg.UserNamespaces)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &Kuberuntime{
		rt:           rt,
		emit:         emit,
		cfg:          cfg,
		log:          cfg.Logger.With().Str("component", "reconcile").Logger(),
		backOff:      NewBackoff(cfg.Clock, cfg.BackOffInitial, cfg.BackOffMax, cfg.BackOffReset),
		imageBackOff: NewBackoff(cfg.Clock, cfg.ImageBackOffInitial, cfg.ImageBackOffMax, 0),
		reasons:      newReasonCache(),
		cache:        newStatusCache(),
		podResources: newPodResourcesCache(),
		userns:       ns,
	}, nil
}

// Config returns the Kuberuntime's defaulted config.
func (m *Kuberuntime) Config() Config { return m.cfg }
