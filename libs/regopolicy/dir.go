package regopolicy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// PollInterval is how often Run checks a policy directory for changes.
const PollInterval = time.Second

// DirSource is the name of the source a policy directory feeds; its
// modules are named DirSource/<file name>.
const DirSource = "dir"

// fileStamp is what tells a changed file: polling compares it, so that an
// unchanged directory costs a stat per file and no read.
type fileStamp struct {
	modTime time.Time
	size    int64
}

// Dir feeds the *.rego files of a directory to a Sink as the source
// DirSource. Load it once, then Run it (or call Sync); only one goroutine
// may use it at a time.
type Dir struct {
	sink   Sink
	dir    string
	log    *slog.Logger
	stamps map[string]fileStamp
}

// NewDir returns the feed of dir into sink; log (nil: none) tells of
// directories that cannot be read.
func NewDir(sink Sink, dir string, log *slog.Logger) *Dir {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dir{sink: sink, dir: dir, log: log}
}

// Load reads the directory and puts its modules in force. Unlike later
// reloads it fails when they do not compile: at the start there is no last
// good set to keep, and an operator should learn of a broken policy before
// the replica serves.
func (d *Dir) Load(ctx context.Context) error {
	modules, stamps, err := d.read()
	if err != nil {
		return err
	}
	if err := d.sink.SetSource(ctx, DirSource, modules); err != nil {
		return err
	}
	d.stamps = stamps
	return nil
}

// Run calls Sync every interval until ctx ends. Errors are logged; a set
// that does not compile leaves the last good one in force.
func (d *Dir) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := d.Sync(ctx); err != nil {
			d.log.Error("reload policy directory", "dir", d.dir, "err", err)
		}
	}
}

// Sync checks the directory once and, when a file was added, removed or
// changed since the last read, hands all of its modules to the sink. It
// says whether it did, and returns the sink's error (a compile error: the
// files are not read again until they change) or the directory's.
func (d *Dir) Sync(ctx context.Context) (bool, error) {
	stamps, err := d.stat()
	if err != nil {
		return false, err
	}
	if equalStamps(d.stamps, stamps) {
		return false, nil
	}
	modules, stamps, err := d.read()
	if err != nil {
		return false, err
	}
	d.stamps = stamps
	return true, d.sink.SetSource(ctx, DirSource, modules)
}

func (d *Dir) stat() (map[string]fileStamp, error) {
	if _, err := os.Stat(d.dir); err != nil {
		return nil, fmt.Errorf("read policy directory: %w", err)
	}
	paths, err := filepath.Glob(filepath.Join(d.dir, "*.rego"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.dir, err)
	}
	stamps := make(map[string]fileStamp, len(paths))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		stamps[filepath.Base(p)] = fileStamp{modTime: fi.ModTime(), size: fi.Size()}
	}
	return stamps, nil
}

// read returns the modules and their stamps, taken before the reads so
// that a write during them is seen at the next poll.
func (d *Dir) read() (map[string]string, map[string]fileStamp, error) {
	stamps, err := d.stat()
	if err != nil {
		return nil, nil, err
	}
	modules := make(map[string]string, len(stamps))
	for name := range stamps {
		data, err := os.ReadFile(filepath.Join(d.dir, name))
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", name, err)
		}
		modules[DirSource+"/"+name] = string(data)
	}
	return modules, stamps, nil
}

func equalStamps(a, b map[string]fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !w.modTime.Equal(v.modTime) || w.size != v.size {
			return false
		}
	}
	return true
}
