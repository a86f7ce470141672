package cli

import (
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/client"
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

// ClientOptions are the flags as the client package's options.
func (f *NATSFlags) ClientOptions() client.Options {
	return client.Options{
		URL: f.URL, CredsFile: f.Creds, NKeyFile: f.NkeySeed, User: f.User, Password: f.Password, Token: f.Token,
		TLSCAFile: f.TLSCA, TLSCertFile: f.TLSCert, TLSKeyFile: f.TLSKey, InboxPrefix: f.InboxPrefix,
	}
}

// Options turns the flags into nats.go options.
func (f *NATSFlags) Options() ([]nats.Option, error) {
	o := f.ClientOptions()
	return o.NATSOptions()
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
func InboxPrefix(user string) string { return client.InboxPrefix(user) }
