package command

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// DefaultLogFormat is the --log-format of every service: text, for a
// terminal; containers ask for json.
const DefaultLogFormat = "text"

// DefaultLogLevel is the --log-level of every service.
const DefaultLogLevel = "info"

// AddLogFormatFlag binds --log-format to format; its value is the
// default.
func AddLogFormatFlag(fs *pflag.FlagSet, format *string) {
	fs.StringVar(format, "log-format", *format, "log format: json or text")
}

// ValidateLogFormat checks a --log-format value: json or text.
func ValidateLogFormat(format string) error {
	if format != "json" && format != "text" {
		return fmt.Errorf("--log-format: want json or text, got %q", format)
	}
	return nil
}

// AddLogLevelFlag binds --log-level to level; its value is the default.
func AddLogLevelFlag(fs *pflag.FlagSet, level *string) {
	fs.StringVar(level, "log-level", *level, "least severe level logged: debug, info, warn or error")
}

// ParseLogLevel reads a level flag's value; the caller names the flag in
// the error. slog's own parser also takes
// offsets such as "info+2", which no operator means; only the four names
// are accepted, in any case.
func ParseLogLevel(level string) (slog.Level, error) {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("want debug, info, warn or error, got %q", level)
}

// NewLogger logs records at level or above to w in format (json, or else
// text), as every service does: JSON in containers, text on a terminal.
func NewLogger(format string, level slog.Level, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
