package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// Log formats of --log-format.
const (
	logFormatAuto = "auto" // text on a terminal, JSON otherwise
	logFormatText = "text" // slog's key=value lines
	logFormatJSON = "json" // one JSON object a line
)

// logFlags are --log-format and --log-level, and whether the command is a
// long-running process (dev, server, worker), whose default level is info:
// one line per run start and end, retry, sweep recovery and lease loss.
// Other commands log warnings only unless -v or --log-level says more.
type logFlags struct {
	format string
	level  string
	// daemon is set by the commands that run a runner or maintenance
	// until stopped, before they open anything.
	daemon bool
}

// parseLogLevel reads a --log-level value (debug, info, warn, error;
// case-insensitive).
func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		err := l.UnmarshalText([]byte(s))
		return l, err
	}
	return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
}

// checkLogFlags refuses a --log-format or --log-level it does not know
// (a usage error: exit status 2).
func checkLogFlags(fs *pflag.FlagSet) error {
	f := logFlags{}
	f.format, _ = fs.GetString("log-format")
	f.level, _ = fs.GetString("log-level")
	switch f.format {
	case logFormatAuto, logFormatText, logFormatJSON:
	default:
		return usageError("--log-format %q: want auto (text on a terminal, JSON otherwise), text or json", f.format)
	}
	if f.level != "" {
		if _, err := parseLogLevel(f.level); err != nil {
			return usageError("%v", err)
		}
	}
	return nil
}

// levelFor is the level of the CLI's logger: --log-level when given; else
// debug with --verbose; else info for a long-running process and warn for
// any other command.
func (f *logFlags) levelFor(verbose bool) slog.Level {
	if l, err := parseLogLevel(f.level); f.level != "" && err == nil {
		return l
	}
	switch {
	case verbose:
		return slog.LevelDebug
	case f.daemon:
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

// handler is the slog handler writing to w: text when --log-format text, or
// auto and w is a terminal; JSON otherwise.
func (f *logFlags) handler(w io.Writer, level slog.Level) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	text := f.format == logFormatText
	if f.format == logFormatAuto || f.format == "" {
		text = isTerminal(w)
	}
	if text {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// isTerminal reports whether w is a file open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
