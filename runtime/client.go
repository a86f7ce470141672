// Package runtime is jetlet's CRI client: it talks to any CRI v1 runtime
// (containerd, CRI-O, jetlet's embedded process runtime) over a unix socket.
//
// It is the boundary where gRPC ends: every failed call returns an error
// wrapping one of the sentinels in errors.go (ErrNotFound, ErrUnavailable,
// ...), so nothing above this package imports grpc or its status package.
//
// Behaviour, per call:
//   - a timeout (Config.RequestTimeout, 2m by default as kubelet);
//   - read-only calls (Version, Status, List*, *Status, ImageFsInfo) are
//     retried with exponential back-off while the runtime is unavailable,
//     within Config.ReadRetryMaxElapsed and the call's deadline;
//   - mutations are never retried: a failed mutation may or may not have
//     happened, and only the caller can decide after re-reading state;
//   - Stop/Remove of sandboxes and containers and RemoveImage treat NotFound
//     as success (the CRI defines them as idempotent, containerd 1.6 returns
//     NotFound for unknown ids where 2.x returns success; kubelet accepts both).
//
// The connection never waits for the runtime (no WaitForReady): while the
// runtime is down, calls fail fast with ErrUnavailable, and gRPC reconnects in
// the background (back-off capped by Config.ReconnectMaxDelay) so the same
// Client works again once the runtime is back.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// APIVersion is the only CRI runtime API version this client speaks.
const APIVersion = "v1"

// Client is a CRI v1 client. Create it with New, then Connect; it is safe
// for concurrent use.
type Client struct {
	cfg    Config
	target string
	log    zerolog.Logger
	conn   atomic.Pointer[connection]
}

type connection struct {
	cc      *grpc.ClientConn
	runtime runtimeapi.RuntimeServiceClient
	image   runtimeapi.ImageServiceClient
	version *runtimeapi.VersionResponse
}

// New validates cfg and returns a Client. It does no I/O: call Connect.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	target, _ := dialTarget(cfg.Endpoint) // validated above
	return &Client{
		cfg:    cfg,
		target: target,
		log:    cfg.Logger.With().Str("component", "cri").Str("endpoint", target).Logger(),
	}, nil
}

// Connect opens the connection and checks that the runtime speaks CRI v1
// with a Version call (retried like every read while the runtime is
// unavailable, so a runtime that is still starting gets a few seconds). When
// the runtime answers with another API version, or does not serve the v1
// RuntimeService at all, the error wraps ErrUnsupportedVersion and names what
// the runtime reported. On error the Client stays unconnected and Connect may
// be called again.
func (c *Client) Connect(ctx context.Context) error {
	if c.conn.Load() != nil {
		return nil
	}
	cc, err := grpc.NewClient(c.target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   c.cfg.ReconnectMaxDelay,
			},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(c.cfg.MaxMsgSize),
			grpc.MaxCallSendMsgSize(c.cfg.MaxMsgSize),
			grpc.ForceCodecV2(newListCodec()),
		),
	)
	if err != nil {
		return fmt.Errorf("%w: cri dial %s: %v", ErrInvalidConfig, c.target, err)
	}
	conn := &connection{
		cc:      cc,
		runtime: runtimeapi.NewRuntimeServiceClient(cc),
		image:   runtimeapi.NewImageServiceClient(cc),
	}
	v, err := call(ctx, c, conn, "Version", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.VersionRequest{Version: APIVersion}, conn.runtime.Version)
	if err != nil {
		_ = cc.Close()
		if errors.Is(err, ErrUnimplemented) {
			return fmt.Errorf("%w: the runtime at %s does not serve the CRI v1 RuntimeService (Version is unimplemented; an old runtime speaking only v1alpha2?): %v",
				ErrUnsupportedVersion, c.target, err)
		}
		return err
	}
	if v.RuntimeApiVersion != APIVersion {
		_ = cc.Close()
		return fmt.Errorf("%w: the runtime at %s is %s %s with runtime API version %q, jetlet needs %q",
			ErrUnsupportedVersion, c.target, v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion, APIVersion)
	}
	conn.version = v
	if !c.conn.CompareAndSwap(nil, conn) {
		_ = cc.Close() // a concurrent Connect won
		return nil
	}
	c.log.Info().Str("runtime_name", v.RuntimeName).Str("runtime_version", v.RuntimeVersion).
		Str("runtime_api_version", v.RuntimeApiVersion).Msg("connected to CRI runtime")
	return nil
}

// Close closes the connection. Calls made afterwards return ErrNotConnected.
func (c *Client) Close() error {
	conn := c.conn.Swap(nil)
	if conn == nil {
		return nil
	}
	return conn.cc.Close()
}

// Endpoint returns the gRPC target the client dials ("unix:///...").
func (c *Client) Endpoint() string { return c.target }

// RuntimeVersion returns the Version answer recorded by Connect, or nil
// before it.
func (c *Client) RuntimeVersion() *runtimeapi.VersionResponse {
	conn := c.conn.Load()
	if conn == nil {
		return nil
	}
	return conn.version
}

func (c *Client) connection(method string) (*connection, error) {
	conn := c.conn.Load()
	if conn == nil {
		return nil, fmt.Errorf("%w: cri %s: call Connect first", ErrNotConnected, method)
	}
	return conn, nil
}

type callKind int

const (
	mutation callKind = iota // never retried
	readOnly                 // retried on ErrUnavailable
)

// call runs one unary CRI call: timeout, retries for reads, error
// conversion, observation. timeout <= 0 means no timeout of its own.
func call[Req, Resp any](
	ctx context.Context, c *Client, conn *connection, method string, kind callKind, timeout time.Duration,
	req Req, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error),
) (Resp, error) {
	start := time.Now()
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	resp, err := fn(ctx, req)
	if err != nil {
		err = convertError(c.target, method, err)
		if kind == readOnly && c.cfg.ReadRetryMaxElapsed > 0 && errors.Is(err, ErrUnavailable) {
			resp, err = retryRead(ctx, c, method, req, fn, err)
		}
	}
	if err != nil {
		var zero Resp
		resp = zero
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(method, time.Since(start), err)
	}
	return resp, err
}

// retryRead repeats a read whose first attempt failed with ErrUnavailable
// (lastErr), with exponential back-off, while the runtime stays unavailable,
// within Config.ReadRetryMaxElapsed and ctx. Built only on that failure, so a
// call that succeeds at once pays nothing for it.
func retryRead[Req, Resp any](
	ctx context.Context, c *Client, method string,
	req Req, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), lastErr error,
) (Resp, error) {
	var zero Resp
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.cfg.ReadRetryInitialInterval),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(c.cfg.ReadRetryMaxElapsed),
	)
	for attempts := 1; ; attempts++ {
		next := b.NextBackOff()
		if next == backoff.Stop {
			return zero, fmt.Errorf("%w (after %d attempts)", lastErr, attempts)
		}
		c.log.Debug().Err(lastErr).Str("method", method).Int("attempt", attempts).Dur("retry_in_ms", next).Msg("cri read failed, retrying")
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			// Report what the runtime said, which is the cause.
			return zero, fmt.Errorf("%w (after %d attempts: %v)", lastErr, attempts, ctx.Err())
		case <-t.C:
		}
		resp, err := fn(ctx, req)
		if err == nil {
			return resp, nil
		}
		lastErr = convertError(c.target, method, err)
		if !errors.Is(lastErr, ErrUnavailable) {
			return zero, fmt.Errorf("%w (after %d attempts)", lastErr, attempts+1)
		}
	}
}
