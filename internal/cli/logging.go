package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	format string
	level  string
}

// logger returns the slog logger the flags ask for, writing to w.
func (f logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q: use debug, info, warn or error", errUsage, f.level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(f.format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q: use text or json", errUsage, f.format)
}
