package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/events"
)

// natsFlags are the connection flags shared by `jetlet run` and the client
// commands.
type natsFlags struct {
	url      string
	creds    string
	nkeySeed string
	user     string
	password string
	token    string
	tlsCA    string
	tlsCert  string
	tlsKey   string
	// inboxPrefix is the prefix of this client's reply subjects, for a NATS
	// that lets each user subscribe to its own prefix only.
	inboxPrefix string
}

func (f *natsFlags) register(fs *pflag.FlagSet, defaultURL string) {
	fs.StringVar(&f.url, "nats-url", defaultURL, "NATS server or cluster URL(s), comma-separated")
	fs.StringVar(&f.creds, "nats-creds", "", "NATS credentials (JWT + seed) file")
	fs.StringVar(&f.nkeySeed, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&f.user, "nats-user", "", "NATS user name")
	fs.StringVar(&f.password, "nats-password", "", "NATS password")
	fs.StringVar(&f.token, "nats-token", "", "NATS authentication token")
	fs.StringVar(&f.tlsCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fs.StringVar(&f.tlsCert, "nats-tls-cert", "", "client certificate file for NATS mutual TLS")
	fs.StringVar(&f.tlsKey, "nats-tls-key", "", "client key file for NATS mutual TLS")
	fs.StringVar(&f.inboxPrefix, "nats-inbox-prefix", "", "prefix of this client's reply subjects (default _INBOX; `jetlet nats-config` gives each user its own)")
}

// hasCredentials says whether the flags or the URLs carry credentials.
func (f *natsFlags) hasCredentials() bool {
	if f.creds != "" || f.nkeySeed != "" || f.user != "" || f.password != "" || f.token != "" || f.tlsCert != "" {
		return true
	}
	for u := range strings.SplitSeq(f.url, ",") {
		if parsed, err := url.Parse(strings.TrimSpace(u)); err == nil && parsed.User != nil {
			return true
		}
	}
	return false
}

// options turns the flags into nats.go options.
func (f *natsFlags) options() ([]nats.Option, error) {
	var opts []nats.Option
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.nkeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(f.nkeySeed)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if f.user != "" || f.password != "" {
		opts = append(opts, nats.UserInfo(f.user, f.password))
	}
	if f.token != "" {
		opts = append(opts, nats.Token(f.token))
	}
	if f.tlsCA != "" {
		opts = append(opts, nats.RootCAs(f.tlsCA))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if f.tlsCert != "" {
		opts = append(opts, nats.ClientCert(f.tlsCert, f.tlsKey))
	}
	if f.inboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(f.inboxPrefix))
	}
	return opts, nil
}

// reconnectForever keeps a long-running process connected: the first connect
// and every reconnect retry without end, with a jittered back-off from 100 ms
// to 5 s so that a fleet of nodes does not stampede a restarted server. A
// permission NATS denies goes to denied.
func reconnectForever(log zerolog.Logger, denied func(*events.PermissionError)) []nats.Option {
	return []nats.Option{
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			d := 100 * time.Millisecond << min(attempts, 6)
			d = min(d, 5*time.Second)
			return d/2 + rand.N(d/2+1)
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("connected to NATS")
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // closed on purpose, at shutdown
			}
			log.Warn().Err(err).Msg("disconnected from NATS; reconnecting")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if pe, ok := events.AsPermissionError(err); ok {
				denied(pe)
				return
			}
			ev := log.Error().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("NATS asynchronous error")
		}),
	}
}

// embeddedAuth is whom the embedded NATS server admits.
type embeddedAuth struct {
	nkeys []string // public user keys whose holders are admitted
	// anonymous is the key a client without credentials connects as
	// (--nats-insecure); empty refuses such clients.
	anonymous string
}

// startEmbeddedNATS starts nats-server in-process with JetStream storing under
// dataDir, listening on listen (port 0 picks a free port).
func startEmbeddedNATS(listen, dataDir, node string, auth embeddedAuth, log zerolog.Logger) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--nats-listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("--nats-listen %q: bad port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "jetlet-" + node,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(dataDir, "nats"),
		NoSigs:     true,
	}
	for _, pub := range auth.nkeys {
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: pub})
	}
	opts.NoAuthUser = auth.anonymous
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	s.SetLoggerV2(natsServerLogger{log}, false, false, false)
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS on %s did not become ready within 30s", listen)
	}
	return s, nil
}
