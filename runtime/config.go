package runtime

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Defaults applied by Config.setDefaults.
const (
	// DefaultRequestTimeout matches kubelet's --runtime-request-timeout.
	DefaultRequestTimeout = 2 * time.Minute
	// DefaultReadRetryMaxElapsed bounds how long a read-only call keeps
	// retrying while the runtime is unavailable.
	DefaultReadRetryMaxElapsed = 5 * time.Second
	// DefaultReconnectMaxDelay caps gRPC's back-off between reconnection
	// attempts, so a restarted runtime is picked up within a few seconds.
	DefaultReconnectMaxDelay = 3 * time.Second
	// DefaultMaxMsgSize matches kubelet's 16 MiB limit for CRI messages
	// (a ListContainers on a busy node is large).
	DefaultMaxMsgSize = 16 * 1024 * 1024
)

// maxUnixPath is the usable length of sun_path on Linux (108 with the NUL).
const maxUnixPath = 107

// Config configures a Client. Only Endpoint is required.
type Config struct {
	// Endpoint of the CRI runtime: "unix:///run/containerd/containerd.sock"
	// or a bare absolute path to the socket.
	Endpoint string
	// RequestTimeout bounds every call except PullImage (unbounded, as in
	// kubelet) and ExecSync (RequestTimeout plus the exec timeout) and
	// GetContainerEvents (a stream). Default 2m.
	RequestTimeout time.Duration
	// ReadRetryMaxElapsed bounds the retries of read-only calls on
	// ErrUnavailable, within the call's own deadline. Default 5s. A negative
	// value disables retries.
	ReadRetryMaxElapsed time.Duration
	// ReadRetryInitialInterval is the first back-off interval between read
	// retries. Default 50ms.
	ReadRetryInitialInterval time.Duration
	// ReconnectMaxDelay caps the back-off between gRPC reconnection
	// attempts. Default 3s.
	ReconnectMaxDelay time.Duration
	// MaxMsgSize is the largest message received or sent. Default 16 MiB.
	MaxMsgSize int
	// Logger is used with component=cri. The zero value logs nothing.
	Logger zerolog.Logger
	// Observe, when set, is called once per CRI call after it finished
	// (retries included) with the CRI method name ("ListContainers"), its
	// duration and the error returned to the caller (nil on success). It
	// must be cheap and safe for concurrent use: it is meant to feed
	// latency histograms and error counters.
	Observe func(method string, d time.Duration, err error)
}

func (c *Config) setDefaults() {
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReadRetryMaxElapsed == 0 {
		c.ReadRetryMaxElapsed = DefaultReadRetryMaxElapsed
	}
	if c.ReadRetryInitialInterval == 0 {
		c.ReadRetryInitialInterval = 50 * time.Millisecond
	}
	if c.ReconnectMaxDelay == 0 {
		c.ReconnectMaxDelay = DefaultReconnectMaxDelay
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = DefaultMaxMsgSize
	}
}

// Validate reports the first problem with c, wrapped in ErrInvalidConfig.
func (c *Config) Validate() error {
	if _, err := dialTarget(c.Endpoint); err != nil {
		return err
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("%w: RequestTimeout %s is negative", ErrInvalidConfig, c.RequestTimeout)
	}
	if c.ReadRetryInitialInterval < 0 {
		return fmt.Errorf("%w: ReadRetryInitialInterval %s is negative", ErrInvalidConfig, c.ReadRetryInitialInterval)
	}
	if c.ReconnectMaxDelay < 0 {
		return fmt.Errorf("%w: ReconnectMaxDelay %s is negative", ErrInvalidConfig, c.ReconnectMaxDelay)
	}
	if c.MaxMsgSize < 0 {
		return fmt.Errorf("%w: MaxMsgSize %d is negative", ErrInvalidConfig, c.MaxMsgSize)
	}
	return nil
}

// dialTarget turns an endpoint into a gRPC target ("unix:///abs/path").
// Accepted: "unix:///abs/path" and a bare absolute path. Relative paths are
// rejected rather than resolved against a working directory that may change.
func dialTarget(endpoint string) (string, error) {
	if endpoint == "" {
		return "", fmt.Errorf("%w: Endpoint is empty", ErrInvalidConfig)
	}
	path := endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		if scheme != "unix" {
			return "", fmt.Errorf("%w: endpoint %q: scheme %q not supported, only unix sockets", ErrInvalidConfig, endpoint, scheme)
		}
		path = rest
	} else if strings.HasPrefix(endpoint, "unix:") {
		return "", fmt.Errorf("%w: endpoint %q: write unix:///absolute/path", ErrInvalidConfig, endpoint)
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w: endpoint %q: socket path must be absolute", ErrInvalidConfig, endpoint)
	}
	if len(path) > maxUnixPath {
		return "", fmt.Errorf("%w: endpoint %q: socket path is %d bytes, the limit is %d", ErrInvalidConfig, endpoint, len(path), maxUnixPath)
	}
	return "unix://" + filepath.Clean(path), nil
}
