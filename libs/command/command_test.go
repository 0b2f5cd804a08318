package command_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/command"
)

type options struct{ name string }

func (o *options) AddFlags(fs *pflag.FlagSet) { fs.StringVar(&o.name, "name", "", "who to greet") }

func (o *options) Config(io.Writer) (string, error) {
	if o.name == "" {
		return "", errors.New("--name is required")
	}
	return o.name, nil
}

type server struct{}

func (s server) Run(ctx context.Context) error { return nil }

func TestRun(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
		wantRan string
		wantOut string
	}{
		{args: []string{"--name=a"}, wantRan: "a"},
		{args: []string{}, wantErr: "--name is required"},
		{args: []string{"--nope"}, wantErr: "unknown flag: --nope"},
		{args: []string{"--help"}, wantOut: "--name string"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var ran string
			var out bytes.Buffer
			err := command.Run(context.Background(), "test", tc.args, &out, &options{}, func(cfg string) (server, error) {
				ran = cfg
				return server{}, nil
			})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if ran != tc.wantRan || !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("built with %q, printed %q", ran, out.String())
			}
		})
	}
}

func TestLogFormat(t *testing.T) {
	for _, f := range []string{"json", "text"} {
		if err := command.ValidateLogFormat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := command.ValidateLogFormat("xml"); err == nil || err.Error() != `--log-format: want json or text, got "xml"` {
		t.Errorf("xml: %v", err)
	}
	format := command.DefaultLogFormat
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	command.AddLogFormatFlag(fs, &format)
	if f := fs.Lookup("log-format"); f == nil || f.DefValue != "text" {
		t.Fatalf("--log-format = %+v, want a flag that defaults to text", f)
	}
	if err := fs.Parse([]string{"--log-format=json"}); err != nil || format != "json" {
		t.Fatalf("parsed %q, %v; want json", format, err)
	}
	var out bytes.Buffer
	command.NewLogger(format, slog.LevelInfo, &out).Info("hello")
	if !strings.HasPrefix(out.String(), "{") {
		t.Errorf("json logger wrote %q", out.String())
	}
}

// TestLogLevel: --log-level takes the four names in any case and nothing
// else, and the logger drops what is below it.
func TestLogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "INFO": slog.LevelInfo, "warn": slog.LevelWarn, "warning": slog.LevelWarn, "Error": slog.LevelError} {
		if got, err := command.ParseLogLevel(in); err != nil || got != want {
			t.Errorf("%s: got %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "info+2", "trace", "4"} {
		if _, err := command.ParseLogLevel(in); err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
			t.Errorf("%q: %v, want an error naming the levels", in, err)
		}
	}
	level := command.DefaultLogLevel
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	command.AddLogLevelFlag(fs, &level)
	if err := fs.Parse([]string{"--log-level=warn"}); err != nil || level != "warn" {
		t.Fatalf("parsed %q, %v; want warn", level, err)
	}
	var out bytes.Buffer
	log := command.NewLogger("text", slog.LevelWarn, &out)
	log.Info("dropped")
	log.Warn("kept")
	if s := out.String(); strings.Contains(s, "dropped") || !strings.Contains(s, "kept") {
		t.Errorf("a warn logger wrote %q", s)
	}
}

// probing is options that probe: the probe sees the parsed flags.
type probing struct {
	options
	probed string
}

func (p *probing) Probe(context.Context) error {
	p.probed = p.name
	if p.name == "down" {
		return errors.New("not ready")
	}
	return nil
}

// TestHealthcheck: the healthcheck subcommand probes with the replica's
// own flags and builds no server; a binary whose options cannot probe
// says so.
func TestHealthcheck(t *testing.T) {
	build := func(string) (server, error) {
		t.Fatal("a health check built a server")
		return server{}, nil
	}
	p := &probing{}
	if err := command.Run(context.Background(), "test", []string{command.HealthcheckCommand, "--name=up"}, io.Discard, p, build); err != nil || p.probed != "up" {
		t.Fatalf("probe of a ready replica: %v, probed %q", err, p.probed)
	}
	if err := command.Run(context.Background(), "test", []string{command.HealthcheckCommand, "--name=down"}, io.Discard, &probing{}, build); err == nil {
		t.Fatal("probe of a replica that is not ready passed")
	}
	if err := command.Run(context.Background(), "test", []string{command.HealthcheckCommand}, io.Discard, &options{}, build); err == nil || err.Error() != "test has no healthcheck" {
		t.Fatalf("options that cannot probe: %v", err)
	}
}

// validating is options that validate without building: Validate sees the
// parsed flags.
type validating struct {
	options
	validated bool
}

func (v *validating) Validate() []error {
	v.validated = true
	if v.name == "" {
		return []error{errors.New("--name is required")}
	}
	return nil
}

// TestCheckFlags: the check-flags subcommand parses with the binary's own
// flags and validates without building a server, so a command line with a
// misspelled flag, a missing required one or a stray argument is refused.
func TestCheckFlags(t *testing.T) {
	build := func(string) (server, error) {
		t.Fatal("a flag check built a server")
		return server{}, nil
	}
	cases := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--name=a"}},
		{args: []string{"--name", "a"}},
		{args: []string{"--nmae=a"}, wantErr: "unknown flag: --nmae"},
		{args: []string{}, wantErr: "invalid options: --name is required"},
		{args: []string{"--name=a", "b"}, wantErr: `arguments that are not flags: ["b"]`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			v := &validating{}
			err := command.Run(context.Background(), "test", append([]string{command.CheckFlagsCommand}, tc.args...), io.Discard, v, build)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr == "" && !v.validated {
				t.Fatal("valid flags passed without Validate")
			}
		})
	}
	if err := command.Run(context.Background(), "test", []string{command.CheckFlagsCommand, "--name=a"}, io.Discard, &options{}, build); err == nil || err.Error() != "test has no check-flags" {
		t.Fatalf("options that cannot validate: %v", err)
	}
}

// countingWriter counts the writes that reach it.
type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *countingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type loggingOptions struct{}

func (loggingOptions) AddFlags(*pflag.FlagSet) {}

func (loggingOptions) Config(out io.Writer) (*slog.Logger, error) {
	return command.NewLogger("text", slog.LevelInfo, out), nil
}

// loggingServer logs lines until it has logged n, then waits until its
// first line has been written out.
type loggingServer struct {
	log *slog.Logger
	out *countingWriter
	n   int
}

func (s loggingServer) Run(ctx context.Context) error {
	for i := range s.n {
		s.log.Info("line", "i", i)
	}
	for !strings.Contains(s.out.String(), "i=0") {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	s.log.Info("last")
	return nil
}

// TestLogsBatched: a server's log lines reach the output in a few
// writes, not one each, without being asked to, and every line is out
// when Run returns.
func TestLogsBatched(t *testing.T) {
	const lines = 1000
	out := &countingWriter{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := command.Run(ctx, "test", nil, out, loggingOptions{}, func(log *slog.Logger) (loggingServer, error) {
		return loggingServer{log: log, out: out, n: lines}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if n := strings.Count(got, "msg=line"); n != lines || !strings.HasSuffix(got, "msg=last\n") {
		t.Fatalf("%d lines, then %q at the end; want %d lines then msg=last", n, got[max(0, len(got)-40):], lines)
	}
	if out.writes > lines/10 {
		t.Fatalf("%d writes for %d lines", out.writes, lines+1)
	}
}
