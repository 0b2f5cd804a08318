package command

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
)

// DefaultLogFormat is the --log-format of every service: text, for a
// terminal; containers ask for json.
const DefaultLogFormat = "text"

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

// NewLogger logs to w in format (json, or else text), as every service
// does: JSON in containers, text on a terminal.
func NewLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
