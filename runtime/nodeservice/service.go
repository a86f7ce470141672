// Package nodeservice serves a node's container logs and exec, its plan for
// an intent, and takes its cordon, over NATS request/reply with the NATS service framework (docs/wire-protocol.md
// section 12): the node opens no port, and NATS permissions decide who may
// ask. It takes requests from NATS as the consumer takes intents, and
// reaches the containers through the CRI.
package nodeservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/schemas"
)

// Runtime is the part of the CRI the service uses, with the signatures of
// *runtime.Client.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// serviceVersion is the version of the service's protocol (the service
// framework wants a semantic version).
const serviceVersion = "1.0.0"

// DefaultExitPoll is how often a follow asks the runtime whether its
// container is still running.
const DefaultExitPoll = time.Second

// Config configures a Service.
type Config struct {
	Node          string
	SubjectPrefix string
	// ClientTimeout is how long a log stream waits for credit before it
	// decides the client went away; 0: schemas.LogClientTimeout.
	ClientTimeout time.Duration
	// ExitPoll: 0 is DefaultExitPoll.
	ExitPoll time.Duration
	// Cordon sets the node's cordon and reports whether that changed it;
	// nil serves no cordon endpoint.
	Cordon func(unschedulable bool) (changed bool, err error)
	// WillRestart says whether pod uid's container name is restarted
	// after an exit with exitCode (its restart policy): its newest instance,
	// exited, is then its previous one, as kubelet's logs --previous reads
	// a crash loop. nil: never.
	WillRestart func(uid, name string, exitCode int32) bool
	// Plan is the node's plan for an intent of pod uid; nil serves no plan
	// endpoint.
	Plan func(ctx context.Context, uid string, intent []byte) (schemas.PodPlan, error)
	// Summary is the node's usage (reconcile/stats); nil serves no stats
	// endpoint.
	Summary func(ctx context.Context) (*statsapi.Summary, error)
	// StreamOpened tells auditors that a stream was opened (an event);
	// nil: nobody.
	StreamOpened func(ctx context.Context, ev schemas.LifecycleEvent)
	Logger       zerolog.Logger
	Registerer   prometheus.Registerer
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid node service config")

// Service is one node's logs and exec service.
type Service struct {
	rt   Runtime
	cfg  Config
	subj schemas.Subjects
	log  zerolog.Logger
	// streams counts the log streams and execs in flight; each runs in its
	// own goroutine, so a follow never holds up another request.
	streams atomic.Int64
	// mu guards stopped and orders wg.Go before Run's wg.Wait.
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	// forwards is the port-forward sessions' connections to the runtime.
	forwards forwards
}

// New returns a Service; it serves nothing before Run.
func New(rt Runtime, cfg Config) (*Service, error) {
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if cfg.ClientTimeout == 0 {
		cfg.ClientTimeout = schemas.LogClientTimeout
	}
	if cfg.ExitPoll == 0 {
		cfg.ExitPoll = DefaultExitPoll
	}
	switch {
	case !schemas.ValidNodeName(cfg.Node):
		return nil, fmt.Errorf("%w: node %q is not a DNS-1123 label", ErrInvalidConfig, cfg.Node)
	case cfg.ClientTimeout < 0 || cfg.ExitPoll < 0:
		return nil, fmt.Errorf("%w: negative client timeout or exit poll", ErrInvalidConfig)
	}
	s := &Service{rt: rt, cfg: cfg, subj: schemas.Subjects{Prefix: cfg.SubjectPrefix},
		log: cfg.Logger.With().Str("component", "nodeservice").Logger()}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "jetlet_node_service_streams",
			Help: "Log streams and execs the node service is serving now.",
		}, func() float64 { return float64(s.streams.Load()) }))
	}
	return s, nil
}

// InFlight is how many log streams and execs are being served.
func (s *Service) InFlight() int64 { return s.streams.Load() }

// Run serves the node's endpoints on nc until ctx is done, then stops
// taking requests, ends the streams in flight and waits for them.
func (s *Service) Run(ctx context.Context, nc *nats.Conn) error {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        schemas.NodeServiceName,
		Version:     serviceVersion,
		Description: "jetlet node " + s.cfg.Node + ": container logs, exec, plans and the cordon",
		Metadata:    map[string]string{"node": s.cfg.Node},
	})
	if err != nil {
		return fmt.Errorf("node service: %w", err)
	}
	g := svc.AddGroup(s.subj.NodeServiceGroup(s.cfg.Node))
	err = errors.Join(
		g.AddEndpoint(schemas.EndpointLogs, micro.ContextHandler(ctx, func(ctx context.Context, r micro.Request) { s.logs(ctx, nc, r) })),
		g.AddEndpoint(schemas.EndpointExec, micro.ContextHandler(ctx, func(ctx context.Context, r micro.Request) { s.exec(ctx, nc, r) })),
	)
	if s.cfg.Cordon != nil {
		err = errors.Join(err, g.AddEndpoint(schemas.EndpointCordon, micro.HandlerFunc(s.cordon)))
	}
	if s.cfg.Plan != nil {
		err = errors.Join(err, g.AddEndpoint(schemas.EndpointPlan, micro.ContextHandler(ctx, s.plan)))
	}
	if s.cfg.Summary != nil {
		err = errors.Join(err, g.AddEndpoint(schemas.EndpointStats, micro.ContextHandler(ctx, s.stats)))
	}
	if st, ok := s.rt.(Streamer); ok {
		err = errors.Join(err, g.AddEndpoint(schemas.EndpointStream, micro.ContextHandler(ctx, func(ctx context.Context, r micro.Request) { s.openStream(ctx, nc, st, r) })))
	}
	if err != nil {
		_ = svc.Stop()
		return fmt.Errorf("node service endpoints: %w", err)
	}
	s.log.Info().Str("subjects", s.subj.NodeService(s.cfg.Node, "*")).Msg("node service serving logs, exec, plans and the cordon")
	<-ctx.Done()
	err = svc.Stop()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// cordon sets the node's cordon as the request asks and replies with it.
func (s *Service) cordon(r micro.Request) {
	var req schemas.CordonRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "cordon request: %v", err))
		return
	}
	changed, err := s.cfg.Cordon(req.Unschedulable)
	if err != nil {
		_ = respondError(r, err)
		return
	}
	s.log.Info().Bool("unschedulable", req.Unschedulable).Bool("changed", changed).Msg("cordon set")
	if err := r.RespondJSON(schemas.CordonResponse{Node: s.cfg.Node, Unschedulable: req.Unschedulable, Changed: changed}); err != nil {
		s.log.Warn().Err(err).Msg("cordon reply not sent")
	}
}

// plan answers with the node's plan for the request's intent.
func (s *Service) plan(ctx context.Context, r micro.Request) {
	var req schemas.PlanRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "plan request: %v", err))
		return
	}
	if !schemas.ValidUID(req.UID) {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "plan request: uid %q is not a pod UID", req.UID))
		return
	}
	plan, err := s.cfg.Plan(ctx, req.UID, req.Intent)
	if err != nil {
		_ = respondError(r, err)
		return
	}
	if err := r.RespondJSON(plan); err != nil {
		s.log.Warn().Err(err).Str("uid", req.UID).Msg("plan reply not sent")
	}
}

// serve runs one request's work in its own goroutine, counted in InFlight
// and awaited by Run; false once Run is stopping.
func (s *Service) serve(work func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.streams.Add(1)
	s.wg.Go(func() {
		defer s.streams.Add(-1)
		work()
	})
	return true
}
