package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/runtime/embedded/images"
	"github.com/jetlet/jetlet/runtime/embedded/network"
)

const (
	// RuntimeName is reported by Version as the runtime name.
	RuntimeName = "jetlet-proc"
	// RuntimeVersion is reported by Version as the runtime version.
	RuntimeVersion = "0.1.0"
	// RuntimeAPIVersion is the CRI API version this runtime serves.
	RuntimeAPIVersion = "v1"
	// kubeAPIVersion is the legacy "version" field of VersionResponse; containerd
	// reports the same constant.
	kubeAPIVersion = "0.1.0"

	// maxMsgSize matches containerd's CRI server limit.
	maxMsgSize = 16 << 20
)

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("proc: invalid config")

// Config configures a Runtime.
type Config struct {
	// Dir is the state root: records, sandboxes and container dirs. Created by
	// Start when absent, and made mode 0700 (closed to other users). Required.
	Dir string
	// ImageDir is the image store's directory. Default Dir/images. On
	// another file system than Dir, which holds the containers' writable
	// layers, ImageFsInfo reports the two file systems apart (KEP-4191's
	// split image file system). Made mode 0700 by Start, as Dir.
	ImageDir string
	// ShimPath is the executable started as each pod's shim, and by the
	// shim as each container's init: cmd/jetlet-shim, or any binary that calls
	// shim.Requested/shim.Main first thing in main. Required: there is no
	// default, since a binary that does not dispatch to the shim would run
	// itself again for every pod.
	ShimPath string
	// Logger receives the runtime's logs; component=proc is added.
	Logger zerolog.Logger
	// LinkMountsOnHost additionally makes each mount visible at its
	// container_path on the host, as a symlink to host_path, when that path does
	// not exist yet. The links are removed with the container. Off by default:
	// mounts are then only linked under the container's rootfs directory
	// (exported as $JETLET_ROOTFS).
	LinkMountsOnHost bool
	// StartTimeout bounds how long StartContainer waits for a shim to report
	// that the process runs. Default 30s.
	StartTimeout time.Duration
	// PodPidsLimit is the most processes a pod's cgroup may hold (kubelet's
	// --pod-max-pids); 0 or -1: no limit.
	PodPidsLimit int64
	// CNIConfDir, when set, gives each pod sandbox that does not ask for the
	// node's network its own network namespace, set up with the first network
	// config in it (see package network). Empty: the runtime, as root, puts
	// those pods on a node-local bridge network of its own (PodBridge,
	// PodCIDR), or in a namespace with only lo when its plugins are not
	// usable; not root, every pod is on the host's network.
	CNIConfDir string
	// CNIBinDirs are searched for the CNI plugins. Default: Debian's
	// /usr/lib/cni, then /opt/cni/bin.
	CNIBinDirs []string
	// PodBridge and PodCIDR are the bridge and the IPv4 subnet of the
	// node-local network (without CNIConfDir). Defaults: DefaultPodBridge,
	// DefaultPodCIDR.
	PodBridge string
	PodCIDR   string
	// HiddenPaths are host paths no container may see in its root (the
	// host's tree): jetlet's data dir, binary and credentials. Dir, ShimPath
	// and the host's private paths are hidden anyway (see hiddenHostPaths).
	HiddenPaths []string
	// HostPrograms makes images the host's programs, as before the runtime
	// ran images: a container's root is the host's tree (its secrets hidden,
	// see HiddenPaths) and an image is the program its reference names. Off
	// by default; a runtime with it reports isolation partial. A runtime
	// that is not root always runs host programs (isolation none).
	HostPrograms bool
	// InsecureRegistries are registry hosts ("host" or "host:port") pulled
	// from over plain HTTP; localhost and 127.0.0.0/8 always are, as Docker
	// does.
	InsecureRegistries []string
	// ImageMirror, when set, is a registry ("host:port", plain HTTP on a
	// loopback address) every pull tries first, as a containerd mirror of
	// every registry: jetlet's own, serving the images stored over NATS.
	ImageMirror string
}

// DefaultCNIBinDirs is where Debian's containernetworking-plugins and the
// upstream release tarball put the plugins.
var DefaultCNIBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// DefaultPodBridge and DefaultPodCIDR are the node-local pod network's. The
// subnet is none of the usual defaults (podman's and containerd's
// 10.88.0.0/16, Docker's 172.17.0.0/16, flannel's 10.244.0.0/16, k3s'
// 10.42.0.0/16), so that it clashes with none of them on the same host.
const (
	DefaultPodBridge = "jetlet0"
	DefaultPodCIDR   = "10.77.0.0/16"
)

func (c *Config) setDefaults() {
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if len(c.CNIBinDirs) == 0 {
		c.CNIBinDirs = DefaultCNIBinDirs
	}
	if c.PodBridge == "" {
		c.PodBridge = DefaultPodBridge
	}
	if c.PodCIDR == "" {
		c.PodCIDR = DefaultPodCIDR
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	}
	if c.ShimPath == "" {
		return fmt.Errorf("%w: ShimPath is required", ErrInvalidConfig)
	}
	if err := (network.Bridge{Name: c.PodBridge, Subnet: c.PodCIDR}).Validate(); c.CNIConfDir == "" && err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if c.PodPidsLimit < -1 {
		return fmt.Errorf("%w: PodPidsLimit %d: want -1 (no limit) or more", ErrInvalidConfig, c.PodPidsLimit)
	}
	return nil
}

// Runtime is the embedded process runtime. It implements the CRI v1
// RuntimeService and ImageService.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	cfg Config
	log zerolog.Logger
	// cgroups makes the pods' and containers' cgroups; set by Start before it
	// serves, read-only after.
	cgroups *cgroups.Hierarchy
	// net is the network of pods, chosen by Start: the CNI network, or
	// network.LoopbackOnly when it is not usable; nil when pods share the
	// host's (not root). netDown says why pods have no usable network, empty
	// when they have. Both read-only once serving.
	net     podNetwork
	netDown string

	// mu guards the maps, the mutable state of sandboxes and containers (state,
	// shim, exit) and the name reservations.
	mu         sync.RWMutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	names      map[string]string // reserved name -> id
	// sandboxesByPod and containersByPod index sandboxes and containers
	// by their pod uid label (listSandboxes, listContainers).
	sandboxesByPod, containersByPod podIndex
	// creating are the sandboxes RunPodSandbox is making, from before their
	// pod cgroup is made until they join sandboxes.
	creating map[string]*sandbox
	images   map[string]*image // id -> image

	// Container events (container_events.go), guarded by mu.
	subs         map[*subscriber]struct{}
	eventBuffer  int      // per subscriber
	pendingExits []string // ids of exits found at Start, for the first subscriber
	pendingOpen  bool     // no subscriber has taken pendingExits yet
	stopped      bool
	done         chan struct{} // closed by Stop: ends every event stream

	// iso is found by Start before serving, then read-only.
	iso isolation
	// splitImageFs says ImageDir and the containers' dirs are on different
	// file systems (found by Start, then read-only).
	splitImageFs bool
	// store holds the images containers run, in ImageDir; opened by
	// Start before serving, then read-only (it has its own locks). Nil when
	// the runtime cannot isolate a container's root (not root): containers
	// are then host programs (image.go).
	store *images.Store
	// copyRoots makes containers' roots copies of their images: overlayfs
	// cannot stack them on this host (found by Start, then read-only).
	copyRoots bool
	// usernsOff says why pods cannot have user namespaces here, nil when
	// they can (found by Start, then read-only).
	usernsOff error
	// hidden are the host paths containers do not see; found by Start
	// before serving, then read-only.
	hidden []string
	// locks tells when shims release their locks; set by Start before it
	// recovers, closed by Stop.
	locks *lockWatch
	// lists encodes the CRI server's messages, keeping list items' encodings.
	lists *listCodec
	// stream serves the URLs of Exec, Attach and PortForward; set by Start
	// before serving, then read-only.
	stream *streamServer

	srvMu   sync.Mutex
	server  *grpc.Server
	started bool
}

// New returns a Runtime for cfg. It does no I/O: state is recovered and the
// socket opened by Start.
func New(cfg Config) (*Runtime, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runtime{
		cfg:            cfg,
		log:            cfg.Logger.With().Str("component", "proc").Logger(),
		sandboxes:      map[string]*sandbox{},
		containers:     map[string]*container{},
		names:          map[string]string{},
		sandboxesByPod: podIndex{}, containersByPod: podIndex{},
		creating: map[string]*sandbox{},
		images:   map[string]*image{},
		lists:    newListCodec(),

		subs:        map[*subscriber]struct{}{},
		eventBuffer: defaultEventBuffer,
		pendingOpen: true,
		done:        make(chan struct{}),
	}, nil
}

// Start recovers the state kept in Dir (re-adopting running containers through
// their shims), listens on socketPath (removing a stale socket) and serves
// RuntimeService and ImageService in the background. It returns once serving.
func (r *Runtime) Start(ctx context.Context, socketPath string) error {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	if r.started {
		return errors.New("proc: runtime already started")
	}
	dir, err := filepath.Abs(r.cfg.Dir)
	if err != nil {
		return fmt.Errorf("proc: state dir: %w", err)
	}
	r.cfg.Dir = dir
	// Dir is closed to other users whoever uses the runtime (jetlet run, or
	// a crictl user of a runtime started by another program): each pod's
	// /dev/shm (a 1777 tmpfs) and each container's files are below it. Its
	// containers never need it: the shim, as root, mounts what they see.
	if err := os.MkdirAll(r.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("proc: create state dir: %w", err)
	}
	if err := os.Chmod(r.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("proc: state dir: %w", err)
	}
	for _, d := range []string{r.sandboxesDir(), r.containersDir()} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("proc: create state dir: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.iso = detectIsolation(r.cfg.ShimPath)
	if r.cfg.HostPrograms && r.iso.level == IsolationFull {
		r.iso.level = IsolationPartial
		r.iso.missing = append(r.iso.missing, "containers run host programs: their root is the host's tree (HostPrograms)")
	}
	if r.iso.level != IsolationFull {
		r.log.Warn().Str("isolation", r.iso.level).Strs("missing", r.iso.missing).
			Msg("pods are not fully isolated from this host")
	}
	if err := r.setupCgroups(); err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	if err := r.setupImageDir(); err != nil {
		return fmt.Errorf("proc: image store: %w", err)
	}
	r.hidden = hiddenHostPaths(r.cfg, hostConfigDir)
	if r.isolated() && !r.cfg.HostPrograms {
		r.store, err = images.Open(images.Options{
			Dir:      r.cfg.ImageDir,
			Logger:   r.log,
			Insecure: r.cfg.InsecureRegistries,
			Mirror:   r.cfg.ImageMirror,
		})
		if err != nil {
			return fmt.Errorf("proc: image store: %w", err)
		}
		if ok, err := overlayUsable(r.cfg.Dir); !ok {
			r.copyRoots = true
			r.log.Warn().Err(err).Str("dir", r.cfg.Dir).
				Msg("overlayfs cannot stack images here: each container's root is a copy of its image, made at its first start")
		}
	}
	if r.usernsOff = r.usernsUsable(); r.usernsOff != nil {
		r.log.Info().Err(r.usernsOff).Msg("pods cannot have user namespaces (hostUsers: false)")
	}
	if r.locks, err = newLockWatch(); err != nil {
		r.log.Warn().Err(err).Msg("each container's exit is waited for by a thread of its own")
	}
	defer func() {
		if !r.started {
			r.locks.close()
		}
	}()
	if err := r.loadNetwork(ctx); err != nil {
		return err
	}
	r.recover()
	r.removeOrphanedCgroups()

	stream, err := r.startStreaming()
	if err != nil {
		return err
	}
	lis, err := listenUnix(socketPath)
	if err != nil {
		_ = stream.http.Close()
		return err
	}
	r.stream = stream
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMsgSize),
		grpc.MaxSendMsgSize(maxMsgSize),
		grpc.ChainUnaryInterceptor(r.logUnary, unaryStatus),
		grpc.ChainStreamInterceptor(streamStatus),
		grpc.ForceServerCodecV2(r.lists),
	)
	runtimeapi.RegisterRuntimeServiceServer(srv, r)
	runtimeapi.RegisterImageServiceServer(srv, r)
	r.server = srv
	r.started = true
	r.sweepOrphanedCgroups()
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			r.log.Error().Err(err).Msg("CRI server stopped")
		}
	}()
	r.log.Info().Str("socket", socketPath).Str("dir", r.cfg.Dir).
		Int("sandboxes", len(r.sandboxes)).Int("containers", len(r.containers)).
		Str("isolation", r.iso.level).Str("shim", r.cfg.ShimPath).Str("streaming", stream.addr).
		Msg("embedded process runtime serving")
	return nil
}

// Stop stops serving, ends every container event stream and removes the
// socket. It never stops containers: their shims keep running and a later
// Start on the same Dir adopts them.
func (r *Runtime) Stop() {
	r.srvMu.Lock()
	defer r.srvMu.Unlock()
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.done)
		if r.cgroups != nil {
			r.cgroups.Close()
		}
	}
	r.mu.Unlock()
	if r.locks != nil {
		r.locks.close()
	}
	if r.server != nil {
		r.server.Stop()
		r.server = nil
		// Ends the listener; streams in progress end with their clients.
		_ = r.stream.http.Close()
		r.log.Info().Msg("embedded process runtime stopped serving")
	}
}

// listenUnix listens on path, replacing a stale socket file but refusing to
// take over a socket someone still serves on.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return nil, fmt.Errorf("proc: socket dir: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("proc: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("proc: socket %s is in use by another server", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("proc: remove stale socket: %w", err)
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("proc: listen: %w", err)
	}
	return lis, nil
}

func (r *Runtime) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	// Debug even when it failed: the client logs its failures at warn.
	r.log.Debug().Err(err).Str("method", info.FullMethod).Dur("took_ms", time.Since(start)).Msg("CRI call")
	return resp, err
}

// setupImageDir makes ImageDir absolute, creates it closed to other users
// as Dir, and finds whether it is on another file system than the
// containers' dirs.
func (r *Runtime) setupImageDir() error {
	if r.cfg.ImageDir == "" {
		r.cfg.ImageDir = filepath.Join(r.cfg.Dir, "images")
	}
	dir, err := filepath.Abs(r.cfg.ImageDir)
	if err != nil {
		return err
	}
	r.cfg.ImageDir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	var images, containers unix.Stat_t
	if err := unix.Stat(dir, &images); err != nil {
		return err
	}
	if err := unix.Stat(r.containersDir(), &containers); err != nil {
		return err
	}
	r.splitImageFs = images.Dev != containers.Dev
	return nil
}

func (r *Runtime) sandboxesDir() string  { return filepath.Join(r.cfg.Dir, "sandboxes") }
func (r *Runtime) containersDir() string { return filepath.Join(r.cfg.Dir, "containers") }
func (r *Runtime) imagesFile() string    { return filepath.Join(r.cfg.Dir, "images.json") }
func (r *Runtime) netnsDir() string      { return filepath.Join(r.cfg.Dir, "netns") }
func (r *Runtime) cniCacheDir() string   { return filepath.Join(r.cfg.Dir, "cni") }
func (r *Runtime) cniConfDir() string    { return filepath.Join(r.cfg.Dir, "cni", "net.d") }
func (r *Runtime) cniIPAMDir() string    { return filepath.Join(r.cfg.Dir, "cni", "networks") }
