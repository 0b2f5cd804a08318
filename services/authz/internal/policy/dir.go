package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// PollInterval is how often a policy directory is checked for changes.
const PollInterval = time.Second

// DirSource is the name of the source the policy directory feeds.
const DirSource = "dir"

// fileStamp is what tells a changed file: polling compares it, so that an
// unchanged directory costs a stat per file and no read.
type fileStamp struct {
	modTime time.Time
	size    int64
}

// Dir feeds the *.rego files of a directory to an Authorizer as the source
// DirSource. Load it once, then Run it; only Run's goroutine may use it
// afterwards.
type Dir struct {
	a      *Authorizer
	dir    string
	stamps map[string]fileStamp
}

// NewDir returns the feed of dir into a.
func NewDir(a *Authorizer, dir string) *Dir { return &Dir{a: a, dir: dir} }

// Load reads the directory and puts its modules in force. Unlike later
// reloads it fails when they do not compile: at the start there is no last
// good set to keep, and an operator should learn of a broken policy before
// the replica serves.
func (d *Dir) Load(ctx context.Context) error {
	modules, stamps, err := d.read()
	if err != nil {
		return err
	}
	if err := d.a.SetSource(ctx, DirSource, modules); err != nil {
		return err
	}
	d.stamps = stamps
	return nil
}

// Run checks the directory every interval until ctx ends, reloading all of
// its modules when a file is added, removed or changed. Errors are logged;
// a set that does not compile leaves the last good one in force.
func (d *Dir) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		stamps, err := d.stat()
		if err != nil {
			d.a.log.Error("read policy directory", "dir", d.dir, "err", err)
			continue
		}
		if equalStamps(d.stamps, stamps) {
			continue
		}
		modules, stamps, err := d.read()
		if err != nil {
			d.a.log.Error("read policy directory", "dir", d.dir, "err", err)
			continue
		}
		// SetSource logs a compile error and keeps the last good set; the
		// files were read, so they are not read again until they change.
		_ = d.a.SetSource(ctx, DirSource, modules)
		d.stamps = stamps
	}
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
