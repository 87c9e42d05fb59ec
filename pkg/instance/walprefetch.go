package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// A restore's replay asks for one WAL segment at a time and waits for it
// (restore_command): fetched then from the bucket, every segment's round
// trips and download would add to the replay. So each segment asked for
// starts the fetches of the next ones, into a spool directory on the data
// volume, and a segment fetched ahead is renamed into place when the
// engine asks for it (CloudNativePG's parallel WAL restore does the same).
// The restore_command moves a spooled segment itself (restoreCommand in
// package command), without starting mydb-instance: the spool is watched,
// and a segment gone from it starts the fetches after it too.

// walPrefetchDir is the spool, in the data volume (a rename into pg_wal
// stays on one filesystem).
const walPrefetchDir = "mydb-wal-prefetch"

// WALPrefetchDir is the spool of the data volume at dataRoot.
func WALPrefetchDir(dataRoot string) string { return filepath.Join(dataRoot, walPrefetchDir) }

// WALAbsentSuffix marks, in the spool, a file the archive did not hold when
// it was fetched ahead.
const WALAbsentSuffix = ".absent"

// walPrefetchWatch is how often the spool is looked at for the segments
// the engine moved out.
const walPrefetchWatch = 10 * time.Millisecond

// walPrefetchDepth is how many segments are fetched ahead (128 MiB of
// disk), walPrefetchWorkers how many at once: in order, so the next one
// the engine needs is not slowed by all the others.
const (
	walPrefetchDepth   = 8
	walPrefetchWorkers = 2
)

// walPrefetch fetches WAL segments ahead of a restore's requests.
type walPrefetch struct {
	store  WALStore
	prefix string
	dir    string
	depth  int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	fetches map[string]*prefetched
	// queue holds the fetches to start, in the order the engine will ask.
	queue chan prefetchJob
}

type prefetchJob struct {
	name string
	f    *prefetched
}

// prefetched is a segment's fetch ahead: done closes when it ends.
type prefetched struct {
	done chan struct{}
	err  error
	path string
}

func newWALPrefetch(store WALStore, prefix, dir string, depth int) (*walPrefetch, error) {
	// What a restore that crashed left is of no use.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &walPrefetch{store: store, prefix: prefix, dir: dir, depth: depth, ctx: ctx, cancel: cancel, fetches: map[string]*prefetched{},
		// Room for every fetch that can be outstanding: after never waits.
		queue: make(chan prefetchJob, 4*depth)}
	p.wg.Add(1 + walPrefetchWorkers)
	go p.watch()
	for range walPrefetchWorkers {
		go p.work()
	}
	return p, nil
}

// work runs the queued fetches, oldest first.
func (p *walPrefetch) work() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case j := <-p.queue:
			j.f.err = fetchWAL(p.ctx, p.store, WALKey(p.prefix, j.name), j.f.path)
			if errors.Is(j.f.err, os.ErrNotExist) {
				// The restore_command answers "not archived" from this
				// marker without asking the manager: the end of the
				// archive, at the end of every replay.
				_ = os.WriteFile(j.f.path+WALAbsentSuffix, nil, 0o600)
			}
			close(j.f.done)
		}
	}
}

// watch notices the segments the engine moved out of the spool, and
// fetches the ones after them.
func (p *walPrefetch) watch() {
	defer p.wg.Done()
	tick := time.NewTicker(walPrefetchWatch)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
		var taken []string
		p.mu.Lock()
		for name, f := range p.fetches {
			select {
			case <-f.done:
			default:
				continue // still fetching
			}
			if f.err != nil {
				continue
			}
			if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
				delete(p.fetches, name)
				taken = append(taken, name)
			}
		}
		p.mu.Unlock()
		for _, name := range taken {
			p.after(name)
		}
	}
}

// take moves the segment name, when it was fetched ahead, to path,
// waiting for its fetch to end. os.ErrNotExist when the archive lacks it;
// errNotAhead when no fetch of it was started.
func (p *walPrefetch) take(ctx context.Context, name, path string) error {
	p.mu.Lock()
	f := p.fetches[name]
	delete(p.fetches, name)
	p.mu.Unlock()
	if f == nil {
		return errNotAhead
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.err != nil {
		return f.err
	}
	return os.Rename(f.path, path)
}

var errNotAhead = fmt.Errorf("not fetched ahead")

// after starts the fetches of the depth segments that follow name (when
// it is a segment's name) that are not fetched or fetching already.
func (p *walPrefetch) after(name string) {
	timeline, segment, ok := api.WALSegment(name)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	// The next timeline's history, which the engine asks for at the end
	// of the WAL (recovery_target_timeline=latest), then the segments.
	names := []string{fmt.Sprintf("%08X.history", timeline+1)}
	for next := segment + 1; next <= segment+uint64(p.depth); next++ {
		names = append(names, api.WALSegmentName(timeline, next))
	}
	for _, n := range names {
		if p.fetches[n] != nil {
			continue
		}
		f := &prefetched{done: make(chan struct{}), path: filepath.Join(p.dir, n)}
		select {
		case p.queue <- prefetchJob{name: n, f: f}:
			p.fetches[n] = f
		default:
			return // the engine is far behind what was fetched: later
		}
	}
}

// close stops the fetches, waits for them and removes the spool.
func (p *walPrefetch) close() {
	p.cancel()
	p.wg.Wait()
	_ = os.RemoveAll(p.dir)
}
