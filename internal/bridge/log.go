package bridge

import (
	"fmt"

	"github.com/rs/zerolog"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// vkLogger gives virtual-kubelet's controllers the bridge's zerolog logger.
// Fatal is logged as an error: the bridge, not a controller, ends the process.
type vkLogger struct{ log zerolog.Logger }

var _ vklog.Logger = vkLogger{}

func (l vkLogger) Debug(args ...any)                { l.log.Debug().Msg(fmt.Sprint(args...)) }
func (l vkLogger) Debugf(f string, args ...any)     { l.log.Debug().Msgf(f, args...) }
func (l vkLogger) Info(args ...any)                 { l.log.Info().Msg(fmt.Sprint(args...)) }
func (l vkLogger) Infof(f string, args ...any)      { l.log.Info().Msgf(f, args...) }
func (l vkLogger) Warn(args ...any)                 { l.log.Warn().Msg(fmt.Sprint(args...)) }
func (l vkLogger) Warnf(f string, args ...any)      { l.log.Warn().Msgf(f, args...) }
func (l vkLogger) Error(args ...any)                { l.log.Error().Msg(fmt.Sprint(args...)) }
func (l vkLogger) Errorf(f string, args ...any)     { l.log.Error().Msgf(f, args...) }
func (l vkLogger) Fatal(args ...any)                { l.log.Error().Msg(fmt.Sprint(args...)) }
func (l vkLogger) Fatalf(f string, args ...any)     { l.log.Error().Msgf(f, args...) }
func (l vkLogger) WithError(err error) vklog.Logger { return vkLogger{l.log.With().Err(err).Logger()} }

func (l vkLogger) WithField(k string, v any) vklog.Logger {
	return vkLogger{l.log.With().Interface(k, v).Logger()}
}

func (l vkLogger) WithFields(fields vklog.Fields) vklog.Logger {
	return vkLogger{l.log.With().Fields(map[string]any(fields)).Logger()}
}
