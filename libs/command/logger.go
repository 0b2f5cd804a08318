package command

import (
	"fmt"
	"io"
	"log/slog"
)

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
