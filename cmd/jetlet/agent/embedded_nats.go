package agent

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// embeddedAuth is whom the embedded NATS server admits.
type embeddedAuth struct {
	nkeys []string // public user keys whose holders are admitted
	// anonymous is the key a client without credentials connects as
	// (--nats-insecure); empty refuses such clients.
	anonymous string
}

// startEmbeddedNATS starts nats-server in-process with JetStream storing under
// dataDir, listening on listen (port 0 picks a free port), with the subject
// mapping that shards intents when streams asks for partitions.
func startEmbeddedNATS(listen, dataDir, node string, auth embeddedAuth, streams natsjs.StreamsConfig, log zerolog.Logger) (*server.Server, error) {
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
	if n := streams.IntentPartitions; n > 1 {
		src, dest := schemas.Subjects{Prefix: streams.SubjectPrefix}.IntentPartitionMapping(n)
		if err := s.GlobalAccount().AddMapping(src, dest); err != nil {
			return nil, fmt.Errorf("embedded NATS: map %s to %s: %w", src, dest, err)
		}
	}
	s.SetLoggerV2(natsServerLogger{log}, false, false, false)
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS on %s did not become ready within 30s", listen)
	}
	return s, nil
}
