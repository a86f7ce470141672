package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// DefaultURL is where `jetlet run` listens with its embedded server.
const DefaultURL = "nats://127.0.0.1:4222"

// SeedFile is the nkey seed that `jetlet run` writes in its data dir for the
// clients of its embedded server (mode 0600).
const SeedFile = "nats-client.nk"

// InboxPrefix is the reply-subject prefix that `jetlet nats-config` gives a
// user: nobody else may subscribe to it, so nobody else reads its replies.
// An auditor connects with Options.InboxPrefix InboxPrefix("auditor").
func InboxPrefix(user string) string { return "_INBOX_" + user }

// Options say where NATS is and how to authenticate. The zero value
// connects to DefaultURL with the seed of ./jetlet-data, if there is one.
type Options struct {
	// URL is the server, or a cluster's servers comma-separated; default
	// DefaultURL.
	URL string
	// DataDir is the data dir of a `jetlet run` whose SeedFile is used when
	// no other credentials are given (default ./jetlet-data); no seed
	// there connects without credentials.
	DataDir string
	// CredsFile is a JWT and seed file; NKeyFile an nkey seed file.
	CredsFile, NKeyFile string
	// User and Password, or Token, authenticate by name.
	User, Password, Token string
	// TLSCAFile verifies the server; TLSCertFile and TLSKeyFile, given
	// together, are a client certificate for mutual TLS.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// InboxPrefix is the prefix of this client's reply subjects, for a NATS
	// that lets each user subscribe to its own (InboxPrefix("auditor")).
	InboxPrefix string
	// SubjectPrefix is the first token of every jetlet subject; default
	// schemas.DefaultSubjectPrefix.
	SubjectPrefix string
	// ConnectTimeout bounds the first connect; default 5s.
	ConnectTimeout time.Duration
	// Name is the connection's name in the server's monitoring.
	Name string
	// LongLived paces reconnects for a program that runs for hours (a
	// follow, an auditor): a NATS restart must not end it.
	LongLived bool
	// Progress, if set, is told in one line whenever a call waits for the
	// cluster (a server lost, a leader being elected).
	Progress io.Writer
}

// HasCredentials says whether the options or the URLs carry credentials.
func (o *Options) HasCredentials() bool {
	if o.CredsFile != "" || o.NKeyFile != "" || o.User != "" || o.Password != "" || o.Token != "" || o.TLSCertFile != "" {
		return true
	}
	for u := range strings.SplitSeq(o.URL, ",") {
		if parsed, err := url.Parse(strings.TrimSpace(u)); err == nil && parsed.User != nil {
			return true
		}
	}
	return false
}

func (o *Options) setDefaults() {
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.DataDir == "" {
		o.DataDir = "./jetlet-data"
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.Name == "" {
		o.Name = "jetlet client"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Validate checks the options without connecting.
func (o *Options) Validate() error {
	if !schemas.ValidSubjectPrefix(o.SubjectPrefix) {
		return errorOf(ErrInvalid, nil, "--subject-prefix %q: must be one subject token", o.SubjectPrefix)
	}
	if o.ConnectTimeout <= 0 {
		return errorOf(ErrInvalid, nil, "--connect-timeout %s: must be positive", o.ConnectTimeout)
	}
	return nil
}

// NATSOptions are the nats.go options of the credentials, TLS and inbox
// prefix given (`jetlet run` connects with them too).
func (o *Options) NATSOptions() ([]nats.Option, error) {
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return nil, errorOf(ErrInvalid, nil, "--nats-tls-cert and --nats-tls-key go together")
	}
	var opts []nats.Option
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, opt)
	}
	if o.User != "" || o.Password != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(o.TLSCAFile))
	}
	if o.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(o.TLSCertFile, o.TLSKeyFile))
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	return opts, nil
}

// Client is a connection to the NATS of a jetlet fleet. Its methods are safe
// for concurrent use. Every call that only reads, or publishes with a
// message id, rides out a cluster that loses a server or elects a leader:
// it tries again, with back-off, until its context ends (or for 30s when
// the context has no deadline).
type Client struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	subj schemas.Subjects
	url  string // redacted, for messages
	// denied learns from the connection's error handler the permissions
	// NATS refused this client.
	denied *deniedRecorder
	// progress is where a wait for the cluster is said.
	progress io.Writer
	// partitions is how many streams hold the intents, once looked up
	// (intentPartitions); 0 before. Guarded by partitionsMu.
	partitionsMu sync.Mutex
	partitions   int
}

// deniedRecorder keeps the last permission NATS refused a client (nats.go
// reports it asynchronously; the refused request itself only times out) and
// ends the waits on it.
type deniedRecorder struct {
	natsjs.Denials
	last atomic.Pointer[natsjs.PermissionError]
}

func (r *deniedRecorder) observe(err error) {
	if pe, ok := natsjs.AsPermissionError(err); ok {
		r.last.Store(pe)
		r.Observe(pe)
	}
}

// Connect connects once, without retrying the first connect: a NATS that is
// not there is reported at once, in words that say what to check. Once
// connected, it moves to another server of the cluster when its own is
// lost.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	nopts, err := opts.NATSOptions()
	if err != nil {
		return nil, err
	}
	auth, err := opts.credentials()
	if err != nil {
		return nil, err
	}
	nopts = append(nopts, auth.opts...)
	denied := &deniedRecorder{}
	nopts = append(nopts,
		nats.Name(opts.Name),
		// A refused subscription shows on the subscription (checkInbox).
		nats.PermissionErrOnSubscribe(true),
		nats.Timeout(opts.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(200*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 0),
		// An asynchronous error is reported where it surfaces, by the call
		// that fails; nats.go's default handler would print to stderr.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied.observe(err) }),
	)
	if opts.LongLived {
		nopts = append(nopts, nats.ReconnectWait(time.Second))
	}
	dialer := &recordingDialer{d: net.Dialer{Timeout: opts.ConnectTimeout}}
	nopts = append(nopts, nats.SetCustomDialer(dialer))
	shown := redactURLs(opts.URL)
	nc, err := nats.Connect(opts.URL, nopts...)
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) && dialer.lastErr() != nil {
			err = dialer.lastErr()
		}
		return nil, connectError(shown, auth, err)
	}
	if err := checkInbox(nc, opts.InboxPrefix); err != nil {
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Client{nc: nc, js: js, subj: schemas.Subjects{Prefix: opts.SubjectPrefix}, url: shown, denied: denied, progress: opts.Progress}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// URL is the server's URL as given, passwords hidden.
func (c *Client) URL() string { return c.url }

// Subjects are the fleet's subjects, under Options.SubjectPrefix.
func (c *Client) Subjects() schemas.Subjects { return c.subj }

// checkInbox fails at once when NATS will not let this user receive the
// replies to its requests: every request would wait out its timeout, and
// the refusal would only show in the server's log. It subscribes where the
// replies come and flushes: the server's refusal comes before its pong.
func checkInbox(nc *nats.Conn, prefix string) error {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		return err
	}
	if _, err := sub.NextMsg(time.Millisecond); errors.Is(err, nats.ErrPermissionViolation) {
		if prefix == "" {
			prefix = strings.TrimSuffix(nats.InboxPrefix, ".")
		}
		pe := &natsjs.PermissionError{Op: "subscribe", Subject: prefix + ".>"}
		return errorOf(ErrDenied, pe, "NATS refused these credentials a subscription to %s.>, where the replies to their requests come: "+
			"give the inbox prefix their permissions allow with --nats-inbox-prefix (`jetlet nats-config` gives %s to a node, %s to the auditor)",
			prefix, InboxPrefix("<node>"), InboxPrefix("auditor"))
	}
	return nil
}

// recordingDialer remembers why the last dial failed: nats.go reports only
// "no servers available", which does not tell a refused connection from a
// wrong host name.
type recordingDialer struct {
	d   net.Dialer
	mu  sync.Mutex
	err error // guarded by mu
}

func (r *recordingDialer) Dial(network, address string) (net.Conn, error) {
	conn, err := r.d.Dial(network, address)
	if err != nil {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
	}
	return conn, err
}

func (r *recordingDialer) lastErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// clientAuth is how a client authenticates, and what to say when it is
// refused.
type clientAuth struct {
	opts []nats.Option
	// seed is the data dir's seed looked for, empty when other credentials
	// were given; seedFound says whether it was there and is used.
	seed      string
	seedFound bool
}

// credentials picks the credentials: those of the options if any were
// given, else the seed that `jetlet run` wrote in DataDir if it is there,
// else none (a NATS that admits anyone).
func (o *Options) credentials() (clientAuth, error) {
	if o.HasCredentials() {
		return clientAuth{}, nil
	}
	dataDir, err := filepath.Abs(o.DataDir) // messages name the file wherever the program ran
	if err != nil {
		return clientAuth{}, fmt.Errorf("--data-dir: %w", err)
	}
	auth := clientAuth{seed: filepath.Join(dataDir, SeedFile)}
	opt, err := nats.NkeyOptionFromSeed(auth.seed)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return auth, nil
	case errors.Is(err, fs.ErrPermission):
		return auth, fmt.Errorf("cannot read the NATS seed %s: permission denied; only the user who started `jetlet run` may read it (run the command as that user, or pass credentials of your own with --nats-nkey or --nats-creds)", auth.seed)
	case err != nil:
		return auth, fmt.Errorf("NATS seed %s: %w", auth.seed, err)
	}
	auth.opts, auth.seedFound = []nats.Option{opt}, true
	return auth, nil
}

// refused explains an authorization failure by the credentials that were
// presented.
func (a clientAuth) refused(url string, err error) error {
	// The server's "Authorization Violation" spelled as nats.go's own errors.
	why := strings.ToLower(trimNATSPrefix(err))
	switch {
	case a.seed == "":
		return errorOf(ErrDenied, err, "NATS at %s refused the credentials (%s); check --nats-creds, --nats-nkey, --nats-user/--nats-password or --nats-token", url, why)
	case a.seedFound:
		return errorOf(ErrDenied, err, "NATS at %s refused the credentials (%s) of the seed %s; it is not a key that server admits: use the seed that the `jetlet run` listening there wrote at <its data dir>/%s (--data-dir, --nats-nkey), or --nats-creds", url, why, a.seed, SeedFile)
	}
	return errorOf(ErrDenied, err, "NATS at %s refused the connection (%s): no credentials were given and there is no seed at %s; use the seed `jetlet run` wrote at <its data dir>/%s (--data-dir, --nats-nkey), or --nats-creds", url, why, a.seed, SeedFile)
}

// connectError turns a failed connect into a message a person can act on.
// The options are named by the flags of the jetlet command line.
func connectError(url string, auth clientAuth, err error) error {
	var hint string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach NATS at %s: connection refused; is `jetlet run` running?", url)
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return auth.refused(url, err)
	case strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "x509") || strings.Contains(err.Error(), "certificate"):
		hint = "check --nats-tls-ca, --nats-tls-cert and --nats-tls-key"
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), strings.Contains(err.Error(), "timeout"):
		hint = "is the address right, and does a firewall let it through? (--connect-timeout)"
	default:
		hint = "is `jetlet run` running, and is --nats-url right?"
	}
	return fmt.Errorf("cannot reach NATS at %s: %v; %s", url, trimNATSPrefix(err), hint)
}

func trimNATSPrefix(err error) string { return strings.TrimPrefix(err.Error(), "nats: ") }

// redactURLs hides the passwords of a comma-separated list of URLs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := url.Parse(p); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
			p = u.String()
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
