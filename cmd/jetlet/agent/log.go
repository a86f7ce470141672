package agent

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// logger is the process logger; components derive theirs with component=...
var logger = zerolog.New(os.Stderr).With().Timestamp().Logger()

// setupLogging makes logs JSON, or human-readable when stderr is a terminal,
// at the given level.
func setupLogging(level string, w io.Writer) error {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return fmt.Errorf("log level %q: want trace, debug, info, warn or error", level)
	}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.TimeOnly}
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	// Every duration is logged under a name ending in _ms, in milliseconds
	// with a fraction.
	zerolog.DurationFieldUnit, zerolog.DurationFieldInteger = time.Millisecond, false
	logger = zerolog.New(w).Level(lvl).With().Timestamp().Logger()
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
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
