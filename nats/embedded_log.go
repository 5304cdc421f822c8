package nats

import (
	"context"
	"fmt"
	"log/slog"
)

// levelTrace is below Debug: the server's protocol trace.
const levelTrace = slog.LevelDebug - 4

// slogLogger bridges nats-server's logger to slog.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) enabled(level slog.Level) bool {
	return s.l.Enabled(context.Background(), level)
}

func (s slogLogger) log(level slog.Level, format string, v []any) {
	if s.enabled(level) {
		s.l.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "nats-server")
	}
}

func (s slogLogger) Noticef(format string, v ...any) { s.log(slog.LevelInfo, format, v) }
func (s slogLogger) Warnf(format string, v ...any)   { s.log(slog.LevelWarn, format, v) }
func (s slogLogger) Fatalf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s slogLogger) Errorf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s slogLogger) Debugf(format string, v ...any)  { s.log(slog.LevelDebug, format, v) }
func (s slogLogger) Tracef(format string, v ...any)  { s.log(levelTrace, format, v) }
