package agent

import (
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

// logger is the process logger; components derive theirs with component=...
var logger = zerolog.New(os.Stderr).With().Timestamp().Logger()

// setupLogging makes the process logger (cli.NewLogger).
func setupLogging(level string, w io.Writer) error {
	l, err := cli.NewLogger(level, w)
	if err != nil {
		return err
	}
	logger = l
	return nil
}

// natsServerLogger sends the embedded nats-server's logs to zerolog.
type natsServerLogger struct{ log zerolog.Logger }

func (l natsServerLogger) Noticef(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l natsServerLogger) Warnf(format string, v ...any)   { l.log.Warn().Msgf(format, v...) }
func (l natsServerLogger) Fatalf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l natsServerLogger) Errorf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l natsServerLogger) Debugf(format string, v ...any)  { l.log.Debug().Msgf(format, v...) }
func (l natsServerLogger) Tracef(format string, v ...any)  { l.log.Trace().Msgf(format, v...) }

func init() {
	// zerolog.Ctx on a context without a logger uses this one instead of
	// silently dropping the line.
	zerolog.DefaultContextLogger = &logger
}
