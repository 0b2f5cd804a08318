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

// WatchDir loads the *.rego files of dir into a as the source DirSource,
// then checks them every interval until ctx ends, reloading all of them
// when any is added, removed or changed. A directory that cannot be read
// is an error at the start and logged afterwards.
func (a *Authorizer) WatchDir(ctx context.Context, dir string, interval time.Duration) error {
	stamps, err := a.loadDir(ctx, dir, nil)
	if err != nil {
		return err
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		next, err := a.loadDir(ctx, dir, stamps)
		if err != nil {
			a.log.Error("read policy directory", "dir", dir, "err", err)
			continue
		}
		stamps = next
	}
}

// loadDir reads dir's modules when their stamps differ from last and hands
// them to a. A compile error is logged by SetSource and does not fail the
// load: the files were read.
func (a *Authorizer) loadDir(ctx context.Context, dir string, last map[string]fileStamp) (map[string]fileStamp, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.rego"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("read policy directory: %w", err)
	}
	stamps := make(map[string]fileStamp, len(paths))
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		stamps[filepath.Base(p)] = fileStamp{modTime: fi.ModTime(), size: fi.Size()}
	}
	if last != nil && equalStamps(last, stamps) {
		return last, nil
	}
	modules := make(map[string]string, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		modules[DirSource+"/"+filepath.Base(p)] = string(data)
	}
	_ = a.SetSource(ctx, DirSource, modules)
	return stamps, nil
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
