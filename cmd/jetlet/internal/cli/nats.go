package cli

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/schemas/natsjs"
)

// NATSFlags are the connection flags shared by `jetlet run` and the client
// commands.
type NATSFlags struct {
	URL      string
	Creds    string
	NkeySeed string
	User     string
	Password string
	Token    string
	TLSCA    string
	TLSCert  string
	TLSKey   string
	// InboxPrefix is the prefix of this client's reply subjects, for a NATS
	// that lets each user subscribe to its own prefix only.
	InboxPrefix string
}

func (f *NATSFlags) Register(fs *pflag.FlagSet, defaultURL string) {
	fs.StringVar(&f.URL, "nats-url", defaultURL, "NATS server or cluster URL(s), comma-separated")
	fs.StringVar(&f.Creds, "nats-creds", "", "NATS credentials (JWT + seed) file")
	fs.StringVar(&f.NkeySeed, "nats-nkey", "", "NATS nkey seed file")
	fs.StringVar(&f.User, "nats-user", "", "NATS user name")
	fs.StringVar(&f.Password, "nats-password", "", "NATS password")
	fs.StringVar(&f.Token, "nats-token", "", "NATS authentication token")
	fs.StringVar(&f.TLSCA, "nats-tls-ca", "", "CA certificate file to verify the NATS server")
	fs.StringVar(&f.TLSCert, "nats-tls-cert", "", "client certificate file for NATS mutual TLS")
	fs.StringVar(&f.TLSKey, "nats-tls-key", "", "client key file for NATS mutual TLS")
	fs.StringVar(&f.InboxPrefix, "nats-inbox-prefix", "", "prefix of this client's reply subjects (default _INBOX; `jetlet nats-config` gives each user its own)")
}

// HasCredentials says whether the flags or the URLs carry credentials.
func (f *NATSFlags) HasCredentials() bool {
	if f.Creds != "" || f.NkeySeed != "" || f.User != "" || f.Password != "" || f.Token != "" || f.TLSCert != "" {
		return true
	}
	for u := range strings.SplitSeq(f.URL, ",") {
		if parsed, err := url.Parse(strings.TrimSpace(u)); err == nil && parsed.User != nil {
			return true
		}
	}
	return false
}

// Options turns the flags into nats.go options.
func (f *NATSFlags) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if f.Creds != "" {
		opts = append(opts, nats.UserCredentials(f.Creds))
	}
	if f.NkeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(f.NkeySeed)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if f.User != "" || f.Password != "" {
		opts = append(opts, nats.UserInfo(f.User, f.Password))
	}
	if f.Token != "" {
		opts = append(opts, nats.Token(f.Token))
	}
	if f.TLSCA != "" {
		opts = append(opts, nats.RootCAs(f.TLSCA))
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if f.TLSCert != "" {
		opts = append(opts, nats.ClientCert(f.TLSCert, f.TLSKey))
	}
	if f.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(f.InboxPrefix))
	}
	return opts, nil
}

// ReconnectForever keeps a long-running process connected: the first connect
// and every reconnect retry without end, with a jittered back-off from 100 ms
// to 5 s so that a fleet of nodes does not stampede a restarted server. A
// permission NATS denies goes to denied.
func ReconnectForever(log zerolog.Logger, denied func(*natsjs.PermissionError)) []nats.Option {
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
			if pe, ok := natsjs.AsPermissionError(err); ok {
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

// InboxPrefix is the reply-subject prefix of a user: nobody else may
// subscribe to it, so nobody else reads its replies (JetStream API answers,
// fetched messages).
func InboxPrefix(user string) string { return "_INBOX_" + user }
