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
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// defaultClientURL is where the client commands look for NATS: the address
// `jetlet run` listens on with its embedded server.
const defaultClientURL = "nats://127.0.0.1:4222"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	nats          cli.NATSFlags
	dataDir       string
	subjectPrefix string
	node          string
	connectWait   time.Duration
	// longLived keeps reconnecting after the first connect (events --follow):
	// a NATS restart must not end a follow.
	longLived bool
}

func (f *clientFlags) register(fs *pflag.FlagSet) {
	f.nats.Register(fs, defaultClientURL)
	fs.StringVar(&f.dataDir, "data-dir", "./jetlet-data", "data dir of `jetlet run`, whose "+cli.ClientSeedFile+" seed is used when no other NATS credentials are given")
	fs.StringVar(&f.subjectPrefix, "subject-prefix", schemas.DefaultSubjectPrefix, "first token of every jetlet subject")
	fs.StringVar(&f.node, "node", "", "node name (a DNS-1123 label)")
	fs.DurationVar(&f.connectWait, "connect-timeout", 5*time.Second, "how long to wait for NATS to answer")
}

func (f *clientFlags) validate() error {
	if strings.ContainsAny(f.subjectPrefix, ".*> \t") || f.subjectPrefix == "" {
		return fmt.Errorf("--subject-prefix %q: must be one subject token", f.subjectPrefix)
	}
	if f.node != "" && !schemas.ValidNodeName(f.node) {
		return fmt.Errorf("--node %q: not a DNS-1123 label (lower-case letters, digits and '-', at most 63)", f.node)
	}
	if f.connectWait <= 0 {
		return fmt.Errorf("--connect-timeout %s: must be positive", f.connectWait)
	}
	return nil
}

// client is one client command's connection to NATS and JetStream.
type client struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	subj schemas.Subjects
	url  string // redacted, for messages
	// denied learns from the connection's error handler the permissions
	// NATS refused this client.
	denied *deniedRecorder
	// stderr is where the command says what it waits for.
	stderr io.Writer
	// partitions is how many streams hold the intents, once looked up
	// (intentPartitions); 0 before. Guarded by partitionsMu: a command
	// may read several nodes' intents at once.
	partitionsMu sync.Mutex
	partitions   int
}

// intentPartitions is how many streams hold the intents: 1 for
// JETLET_INTENTS alone, else the partition streams' count (docs/scaling.md).
// No intents stream at all is jetstream.ErrStreamNotFound, explained.
func (c *client) intentPartitions(ctx context.Context) (int, error) {
	c.partitionsMu.Lock()
	defer c.partitionsMu.Unlock()
	if c.partitions > 0 {
		return c.partitions, nil
	}
	var n int
	err := c.ridingOut(ctx, "stream "+schemas.StreamIntents, func(ctx context.Context) (err error) {
		n, err = natsjs.IntentPartitions(ctx, c.js)
		return err
	})
	if err != nil {
		return 0, c.jsError("stream "+schemas.StreamIntents, err)
	}
	c.partitions = n
	return n, nil
}

// intentsStream is the stream that holds node's intents.
func (c *client) intentsStream(ctx context.Context, node string) (string, error) {
	n, err := c.intentPartitions(ctx)
	if err != nil {
		return "", err
	}
	return schemas.IntentsStream(node, n), nil
}

// intentsStreams are the streams that hold the intents of node, or of
// every node when node is "" or a wildcard.
func (c *client) intentsStreams(ctx context.Context, node string) ([]string, error) {
	n, err := c.intentPartitions(ctx)
	if err != nil {
		return nil, err
	}
	if node == "" || node == "*" {
		return schemas.IntentsStreams(n), nil
	}
	return []string{schemas.IntentsStream(node, n)}, nil
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

// connectClient connects once, without retrying: a person is waiting, and a
// NATS that is not there should be reported at once.
func connectClient(cmd *cobra.Command, f *clientFlags) (*client, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	opts, err := f.nats.Options()
	if err != nil {
		return nil, err
	}
	auth, err := f.credentials()
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth.opts...)
	denied := &deniedRecorder{}
	opts = append(opts,
		nats.Name("jetlet "+cmd.Name()),
		// A refused subscription shows on the subscription (checkInbox).
		nats.PermissionErrOnSubscribe(true),
		nats.Timeout(f.connectWait),
		// Once connected, it moves to another server of the cluster when
		// its own is lost, for as long as the command waits (ridingOut).
		nats.MaxReconnects(-1),
		nats.ReconnectWait(200*time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 0),
		// An asynchronous error is reported where it surfaces, by the call
		// that fails; nats.go's default handler would print to stderr.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied.observe(err) }),
	)
	if f.longLived {
		opts = append(opts, nats.ReconnectWait(time.Second))
	}
	dialer := &recordingDialer{d: net.Dialer{Timeout: f.connectWait}}
	opts = append(opts, nats.SetCustomDialer(dialer))
	shown := redactURLs(f.nats.URL)
	nc, err := nats.Connect(f.nats.URL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) && dialer.lastErr() != nil {
			err = dialer.lastErr()
		}
		return nil, connectError(shown, auth, err)
	}
	if err := checkInbox(nc, f.nats.InboxPrefix); err != nil {
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &client{nc: nc, js: js, subj: schemas.Subjects{Prefix: f.subjectPrefix}, url: shown, denied: denied, stderr: cmd.ErrOrStderr()}, nil
}

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
		return fmt.Errorf("NATS refused these credentials a subscription to %s.>, where the replies to their requests come: "+
			"give the inbox prefix their permissions allow with --nats-inbox-prefix (`jetlet nats-config` gives %s to a node, %s to the auditor)",
			prefix, cli.InboxPrefix("<node>"), cli.InboxPrefix("auditor"))
	}
	return nil
}

func (c *client) close() { c.nc.Close() }

// recordingDialer remembers why the last dial failed: nats.go reports only
// "no servers available", which does not tell a refused connection from a
// wrong host name.
type recordingDialer struct {
	d   net.Dialer
	mu  sync.Mutex
	err error
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

// clientAuth is how a client command authenticates, and what to say when it
// is refused.
type clientAuth struct {
	opts []nats.Option
	// seed is the data dir's seed the command looked for, empty when
	// --nats-* credentials were given; seedFound says whether it was there
	// and is used.
	seed      string
	seedFound bool
}

// credentials picks the client command's credentials: the --nats-* ones if any
// were given, else the seed that `jetlet run` wrote in --data-dir if it is
// there, else none (a NATS that admits anyone).
func (f *clientFlags) credentials() (clientAuth, error) {
	if f.nats.HasCredentials() {
		return clientAuth{}, nil
	}
	dataDir, err := filepath.Abs(f.dataDir) // messages name the file wherever the command ran
	if err != nil {
		return clientAuth{}, fmt.Errorf("--data-dir: %w", err)
	}
	auth := clientAuth{seed: cli.ClientSeedPath(dataDir)}
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
		return fmt.Errorf("NATS at %s refused the credentials (%s); check --nats-creds, --nats-nkey, --nats-user/--nats-password or --nats-token", url, why)
	case a.seedFound:
		return fmt.Errorf("NATS at %s refused the credentials (%s) of the seed %s; it is not a key that server admits: use the seed that the `jetlet run` listening there wrote at <its data dir>/%s (--data-dir, --nats-nkey), or --nats-creds", url, why, a.seed, cli.ClientSeedFile)
	}
	return fmt.Errorf("NATS at %s refused the connection (%s): no credentials were given and there is no seed at %s; use the seed `jetlet run` wrote at <its data dir>/%s (--data-dir, --nats-nkey), or --nats-creds", url, why, a.seed, cli.ClientSeedFile)
}

// connectError turns a failed connect into a message a person can act on.
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

// stream opens a jetlet stream, explaining what its absence means.
func (c *client) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := c.ridingOut(ctx, "stream "+name, func(ctx context.Context) (err error) {
		s, err = c.js.Stream(ctx, name)
		return err
	})
	if err != nil {
		return nil, c.jsError("stream "+name, err)
	}
	return s, nil
}

// bucket opens a jetlet KV bucket, explaining what its absence means.
func (c *client) bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := c.ridingOut(ctx, "bucket "+name, func(ctx context.Context) (err error) {
		kv, err = c.js.KeyValue(ctx, name)
		return err
	})
	if err != nil {
		return nil, c.jsError("bucket "+name, err)
	}
	return kv, nil
}

func (c *client) jsError(what string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("NATS at %s has no JetStream for this account; point --nats-url at the server `jetlet run` uses", c.url)
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return fmt.Errorf("%s not found at %s; start `jetlet run` once against this NATS to create the streams and buckets (or check --subject-prefix)", what, c.url)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.Canceled):
		if pe := c.denied.last.Load(); pe != nil {
			return fmt.Errorf("%s: NATS at %s denied these credentials: %w", what, c.url, pe)
		}
		return fmt.Errorf("%s: NATS at %s did not answer in time", what, c.url)
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return fmt.Errorf("%s: lost the connection to NATS at %s", what, c.url)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Commands are the client commands of the jetlet binary.
func Commands() []*cobra.Command {
	return []*cobra.Command{newApplyCommand(), newCreateCommand(), newDeleteCommand(), newGetCommand(), newEventsCommand(), newHistoryCommand(),
		newDescribeCommand(), newLogsCommand(), newExecCommand(), newProvisionCommand(), newNATSConfigCommand(), newNodeCommand(), newImageCommand(), newDiffCommand()}
}
