package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
)

// DefaultListen is where a node serves the registry: containerd's
// hosts.toml names it (docs/containerd.md).
const DefaultListen = "127.0.0.1:5050"

// ErrNotLoopback: the registry serves whatever the store holds to whoever
// reaches it, so it listens on a loopback address only.
var ErrNotLoopback = errors.New("not a loopback address")

// Config configures a Server.
type Config struct {
	// Listen is the loopback address served, host:port (port 0 picks one).
	Listen string
	// Bucket is the object store (default jetlet_images).
	Bucket string
	// Window bounds the bytes of a blob read ahead of the client, per
	// request (default 1 MiB).
	Window int
	// Timeout bounds each lookup, and each window of a blob, in NATS
	// (default 30s).
	Timeout time.Duration
	Logger  zerolog.Logger
}

func (c *Config) setDefaults() {
	if c.Bucket == "" {
		c.Bucket = schemas.ObjectStoreImages
	}
	if c.Window == 0 {
		c.Window = 1 << 20
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
}

// Validate rejects an address that is not a loopback one and sizes that
// cannot work.
func (c *Config) Validate() error {
	if err := CheckLoopback(c.Listen); err != nil {
		return err
	}
	if c.Window < 1 {
		return fmt.Errorf("window %d: must be positive", c.Window)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("timeout %s: must be positive", c.Timeout)
	}
	return nil
}

// CheckLoopback accepts host:port whose host is a loopback IP or
// "localhost".
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: %w (127.0.0.1, ::1 or localhost): the registry serves the store to whoever reaches it", addr, ErrNotLoopback)
	}
	return nil
}

// Server is a node's read-only registry backed by the object store. Its
// fields are set by Listen and never changed: Addr may be called from any
// goroutine, Serve once.
type Server struct {
	cfg Config
	lis net.Listener
}

// Listen checks cfg and binds its address; Serve serves it.
func Listen(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	// "localhost" could resolve elsewhere: what was bound is what counts.
	if tcp, ok := lis.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		lis.Close()
		return nil, fmt.Errorf("%q bound %s: %w", cfg.Listen, lis.Addr(), ErrNotLoopback)
	}
	return &Server{cfg: cfg, lis: lis}, nil
}

// Addr is the address served, host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close releases the address of a server that will not be served; Serve
// releases it when it returns.
func (s *Server) Close() error { return s.lis.Close() }

// Serve serves the registry from js's object store until ctx is done, then
// closes the listener; requests in flight are cut. It fails at once if the
// object store is not there.
func (s *Server) Serve(ctx context.Context, js jetstream.JetStream) error {
	defer s.lis.Close()
	lookupCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	store, err := js.ObjectStore(lookupCtx, s.cfg.Bucket)
	cancel()
	if err != nil {
		return fmt.Errorf("object store %s: %w", s.cfg.Bucket, err)
	}
	h := &handler{
		store:   store,
		chunks:  chunkReader{nc: js.Conn(), bucket: s.cfg.Bucket, window: s.cfg.Window, timeout: s.cfg.Timeout},
		timeout: s.cfg.Timeout,
		log:     s.cfg.Logger,
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	s.cfg.Logger.Info().Str("address", "http://"+s.Addr()).Str("bucket", s.cfg.Bucket).Msg("serving the images of the bus read-only (OCI distribution API)")
	if err := srv.Serve(s.lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
