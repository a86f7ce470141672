package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// NewLogger is a long-running command's logger (`jetlet run`, `jetlet
// bridge`): JSON, or human-readable when w is a terminal, at level.
func NewLogger(level string, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Nop(), fmt.Errorf("log level %q: want trace, debug, info, warn or error", level)
	}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		w = zerolog.ConsoleWriter{Out: f, TimeFormat: time.TimeOnly}
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	// Every duration is logged under a name ending in _ms, in milliseconds
	// with a fraction.
	zerolog.DurationFieldUnit, zerolog.DurationFieldInteger = time.Millisecond, false
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
