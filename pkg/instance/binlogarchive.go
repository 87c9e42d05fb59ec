package instance

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
)

// Continuous archiving of MariaDB's binary logs. The server has no
// archive_command: the manager looks at its binary logs every second while
// it is the primary, uploads each file the server closed, and closes the
// one it writes every archive timeout (FLUSH BINARY LOGS), so the archive
// trails the server by at most that. Each file goes under an epoch of its
// own, a random name kept in the data directory: a clone or a restore
// starts new files of the same names, and an upload must never meet
// another file's object at its key. Beside each file a manifest records
// its GTID positions and times (binlog.Summary), which a restore reads to
// choose the files it replays without fetching them.

// BinlogArchiver is a driver whose server's binary logs the manager
// archives, and which restores to a point by replaying them.
type BinlogArchiver interface {
	// BinaryLogs names the server's binary log files, oldest first; the
	// last is the one it writes.
	BinaryLogs(ctx context.Context) ([]string, error)
	// BinaryLogDir is the directory they are in.
	BinaryLogDir() string
	// RotateBinaryLog closes the file the server writes and opens the next.
	RotateBinaryLog(ctx context.Context) error
	// RestoreToBinlogs is Backuper.Restore, then a replay up to target of
	// the archived files that follow the backup's GTID position: fetch
	// gets them (in the order to replay) given that position.
	RestoreToBinlogs(ctx context.Context, r io.Reader, verify func() error, target api.RecoveryTarget, fetch FetchBinlogs) error
}

// FetchBinlogs chooses the archived files a restore from a backup at base
// replays to target, in order; each is downloaded into dir when its
// Fetch is called, one at a time, so a replay needs the space of one file
// beside the data, not of the whole chain.
type FetchBinlogs func(ctx context.Context, base binlog.Position, dir string) ([]ReplayFile, error)

// Into is f with dir made empty first (what a failed restore left there
// is of no use), its error said to be the archive's.
func (f FetchBinlogs) Into(ctx context.Context, base binlog.Position, dir string) ([]ReplayFile, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	files, err := f(ctx, base, dir)
	if err != nil {
		return nil, fmt.Errorf("the binary log archive: %w", err)
	}
	return files, nil
}

// ReplayEach replays files in order after base, one at a time: each one
// not wholly applied is downloaded (beside the data, never more than one),
// handed to replay with the position applied before it, and removed.
// replay answers whether the target was in that file, which ends the
// replay.
func ReplayEach(ctx context.Context, log *slog.Logger, files []ReplayFile, base binlog.Position,
	replay func(local string, f ReplayFile, applied binlog.Position) (last bool, err error)) error {
	applied := base
	for _, f := range files {
		if applied.Covers(f.Summary.End) {
			continue
		}
		began := time.Now()
		local, err := f.Fetch(ctx)
		if err != nil {
			return fmt.Errorf("fetching %s: %w", f.Key, err)
		}
		last, err := replay(local, f, applied)
		if rmErr := os.Remove(local); err == nil && rmErr != nil {
			err = rmErr
		}
		if err != nil {
			return err
		}
		log.Info("replayed a binary log", "file", f.Key, "seconds", time.Since(began).Seconds())
		if last {
			return nil
		}
		for _, g := range f.Summary.End {
			applied = applied.With(g)
		}
	}
	return nil
}

// ReplayFile is an archived binary log file to replay: what its manifest
// says, and how to download it (size and checksum checked), answering the
// local path.
type ReplayFile struct {
	Key     string
	Summary binlog.Summary
	Fetch   func(ctx context.Context) (string, error)
}

// BinlogStore is what binary log archiving needs of a bucket.
type BinlogStore interface {
	WALStore
	Put(ctx context.Context, key string, r io.Reader) (objectstore.Object, error)
	List(ctx context.Context, prefix string) ([]objectstore.Object, error)
}

// binlogEpochFile holds the data directory's archive epoch.
const binlogEpochFile = "mydb-archive-epoch"

// BinlogKey is the object key of binary log file name of epoch in the
// archive at prefix; its manifest is at the same key with ".json".
func BinlogKey(prefix, epoch, name string) string {
	return prefix + "/binlog/" + epoch + "/" + name
}

// BinlogManifest is what is kept beside each archived file.
type BinlogManifest struct {
	File    string         `json:"file"`
	Size    int64          `json:"size"`
	SHA256  string         `json:"sha256"`
	Summary binlog.Summary `json:"summary"`
}

// binlogEpoch reads dir's archive epoch, making one the first time.
func binlogEpoch(dir string) (string, error) {
	p := filepath.Join(dir, binlogEpochFile)
	b, err := os.ReadFile(p)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	epoch := time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(id)
	if err := WriteFileAtomic(p, []byte(epoch+"\n"), 0o600); err != nil {
		return "", err
	}
	return epoch, nil
}

// archiveBinlogs archives the server's closed binary logs while this
// instance is the primary and an archive is configured.
func (m *Manager) archiveBinlogs(ctx context.Context, ba BinlogArchiver) {
	every := m.opts.ArchiveTimeout
	if every <= 0 {
		every = DefaultArchiveTimeout
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	archived := map[string]bool{} // epoch/name
	lastRotation := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		primary := m.servingPrimary()
		a := &m.archive
		a.mu.Lock()
		dest, store := a.dest, a.store
		a.mu.Unlock()
		if !primary || dest == nil {
			lastRotation = time.Now()
			continue
		}
		if err := m.archiveClosedBinlogs(ctx, ba, dest, store, archived); err != nil {
			m.log.Error("archiving binary logs failed: the server keeps them, the next look retries", "err", err)
			continue
		}
		if time.Since(lastRotation) >= every {
			// Even with nothing written: the closed file's Rotate event
			// is what carries the recoverable window forward.
			if err := ba.RotateBinaryLog(ctx); err != nil {
				m.log.Info("closing the binary log failed", "err", err)
				continue
			}
			lastRotation = time.Now()
			if err := m.archiveClosedBinlogs(ctx, ba, dest, store, archived); err != nil {
				m.log.Error("archiving binary logs failed: the server keeps them, the next look retries", "err", err)
			}
		}
	}
}

// archiveClosedBinlogs uploads each closed file not yet archived, in order,
// and keeps the status current.
func (m *Manager) archiveClosedBinlogs(ctx context.Context, ba BinlogArchiver, dest *api.S3Object, store WALStore, archived map[string]bool) error {
	bs, ok := store.(BinlogStore)
	if !ok {
		return fmt.Errorf("the store of %s cannot keep binary logs", dest.Endpoint)
	}
	names, err := ba.BinaryLogs(ctx)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return nil
	}
	epoch, err := binlogEpoch(ba.BinaryLogDir())
	if err != nil {
		return err
	}
	closed := names[:len(names)-1]
	var todo []string
	present := map[string]bool{}
	for _, name := range closed {
		present[epoch+"/"+name] = true
		if !archived[epoch+"/"+name] {
			todo = append(todo, name)
		}
	}
	for key := range archived {
		if !present[key] {
			delete(archived, key) // purged by the server, or another epoch's
		}
	}
	a := &m.archive
	a.mu.Lock()
	a.status.Pending = len(todo)
	a.mu.Unlock()
	for _, name := range todo {
		began := time.Now().UTC()
		summary, err := m.uploadBinlog(ctx, bs, dest.Key, epoch, filepath.Join(ba.BinaryLogDir(), name))
		a.mu.Lock()
		if err != nil {
			a.status.Failed++
			a.status.LastFailure, a.status.LastFailureTime = fmt.Sprintf("%s: %v", name, err), &began
			a.mu.Unlock()
			return err
		}
		archived[epoch+"/"+name] = true
		a.status.Archived++
		a.status.Pending--
		a.status.LastArchived, a.status.LastArchivedTime = epoch+"/"+name, &began
		if summary.Rotated {
			// Every transaction whose time is before the second of the
			// Rotate is in this file or an earlier one: what a restore to
			// that second replays (mariadb.stopDatetime).
			at := summary.LastEvent
			if a.status.LastRecoverableTime == nil || at.After(*a.status.LastRecoverableTime) {
				a.status.LastRecoverableTime = &at
			}
		}
		a.mu.Unlock()
	}
	return nil
}

// uploadBinlog uploads one closed file and its manifest. An object already
// at the file's key must hold the same bytes (uploadWAL).
func (m *Manager) uploadBinlog(ctx context.Context, store BinlogStore, prefix, epoch, file string) (binlog.Summary, error) {
	f, err := os.Open(file)
	if err != nil {
		return binlog.Summary{}, err
	}
	summary, err := binlog.Summarize(f)
	f.Close()
	if err != nil {
		return binlog.Summary{}, fmt.Errorf("%s: %w", filepath.Base(file), err)
	}
	size, sum, err := fileDigest(file)
	if err != nil {
		return binlog.Summary{}, err
	}
	key := BinlogKey(prefix, epoch, filepath.Base(file))
	if err := m.uploadWAL(ctx, store, key, file); err != nil {
		return binlog.Summary{}, err
	}
	// A manager that starts again meets the files it archived before:
	// their manifests are there too.
	if _, err := store.Stat(ctx, key+".json"); err == nil {
		return summary, nil
	} else if !errors.Is(err, objectstore.ErrNotFound) {
		return binlog.Summary{}, err
	}
	b, err := json.Marshal(BinlogManifest{File: filepath.Base(file), Size: size, SHA256: sum, Summary: summary})
	if err != nil {
		return binlog.Summary{}, err
	}
	if _, err := store.Put(ctx, key+".json", bytes.NewReader(b)); err != nil {
		return binlog.Summary{}, err
	}
	return summary, nil
}

// binlogChain chooses, of the manifests in an archive, the files a restore
// from base replays to target, in order: every file holding a transaction
// after base, from whichever epoch holds it first, each file starting at
// or before what the ones before it reach (no gap), until one the server
// closed at or after the target (its Rotate's whole second; the API's
// targets are whole seconds too). A target the chain does not reach is an
// error naming how far it goes.
func binlogChain(manifests map[string]BinlogManifest, base binlog.Position, target api.RecoveryTarget) ([]string, error) {
	keys := make([]string, 0, len(manifests))
	for k := range manifests {
		keys = append(keys, k)
	}
	// In the order of the positions they start at; of files starting at
	// the same point the longer first.
	order := func(p binlog.Position) uint64 {
		var n uint64
		for _, g := range p {
			n += g.Seq
		}
		return n
	}
	slices.SortFunc(keys, func(a, b string) int {
		sa, sb := manifests[a].Summary, manifests[b].Summary
		switch {
		case order(sa.Begin()) != order(sb.Begin()):
			return cmp.Compare(order(sa.Begin()), order(sb.Begin()))
		case order(sa.End) != order(sb.End):
			return -cmp.Compare(order(sa.End), order(sb.End))
		}
		return strings.Compare(a, b)
	})
	var gtid binlog.Position // a GTID target, as a position
	if target.GTID != "" {
		g, err := binlog.ParseGTID(target.GTID)
		if err != nil {
			return nil, err
		}
		gtid = binlog.Position{g}
		if base.Covers(gtid) {
			return nil, fmt.Errorf("the backup (at %s) already holds the target %s: restore from an older backup", base, target.GTID)
		}
	}
	applied := base
	var chain []string
	for _, k := range keys {
		s := manifests[k].Summary
		if applied.Covers(s.End) {
			continue // nothing after what is applied
		}
		if !applied.Covers(s.Begin()) {
			return nil, fmt.Errorf("the archive has a gap: its files reach %s, and the next one, %s, begins after %s", applied, k, s.Begin())
		}
		chain = append(chain, k)
		for _, g := range s.End {
			applied = applied.With(g)
		}
		if gtid != nil && applied.Covers(gtid) {
			return chain, nil // this file holds the target's transaction
		}
		if target.Time != nil && !s.LastEvent.Before(*target.Time) {
			// The server closed this file at the target or after: every
			// transaction before the target is in the chain (a MariaDB
			// restore replays those of the seconds before the target's,
			// a MySQL one those committed at or before it).
			return chain, nil
		}
	}
	if gtid != nil {
		return nil, fmt.Errorf("its files reach %s from the backup's position %s, not the target %s", applied, base, target.GTID)
	}
	if target.Time == nil {
		return chain, nil
	}
	// The target is after every transaction archived: the archive holds
	// it only if a file ending where the chain ends was closed in the
	// target's second or later (the files of an idle database close every
	// archive timeout).
	var reach time.Time
	for _, k := range keys {
		s := manifests[k].Summary
		if s.End.Covers(applied) && applied.Covers(s.End) && s.LastEvent.After(reach) {
			reach = s.LastEvent
		}
	}
	if reach.Before(*target.Time) {
		return nil, fmt.Errorf("its files reach %s from the backup's position %s, not the target %s",
			reach.Format(time.RFC3339), base, target.Time.UTC().Format(time.RFC3339Nano))
	}
	return chain, nil
}

// HoldsTarget tells whether a file that ends at end holds target's GTID:
// the file where a replay to it stops.
func HoldsTarget(end binlog.Position, target api.RecoveryTarget) bool {
	if target.GTID == "" {
		return false
	}
	g, err := binlog.ParseGTID(target.GTID)
	return err == nil && end.Covers(binlog.Position{g})
}

// BinlogLister is what reading an archive's manifests needs of a bucket.
type BinlogLister interface {
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	List(ctx context.Context, prefix string) ([]objectstore.Object, error)
}

// ListBinlogManifests reads the manifests of the binary logs archived at
// prefix, by the key of their file.
func ListBinlogManifests(ctx context.Context, store BinlogLister, prefix string) (map[string]BinlogManifest, error) {
	objects, err := store.List(ctx, prefix+"/binlog/")
	if err != nil {
		return nil, err
	}
	manifests := map[string]BinlogManifest{}
	for _, o := range objects {
		if !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		rc, err := store.Get(ctx, o.Key)
		if err != nil {
			return nil, err
		}
		var mf BinlogManifest
		err = json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&mf)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Key, err)
		}
		manifests[strings.TrimSuffix(o.Key, ".json")] = mf
	}
	return manifests, nil
}

// fetchBinlogs is the FetchBinlogs of a restore from the archive at
// prefix of store.
func (m *Manager) fetchBinlogs(store WALStore, prefix string, target api.RecoveryTarget) FetchBinlogs {
	return func(ctx context.Context, base binlog.Position, dir string) ([]ReplayFile, error) {
		bs, ok := store.(BinlogStore)
		if !ok {
			return nil, errors.New("the archive's store cannot list binary logs")
		}
		manifests, err := ListBinlogManifests(ctx, bs, prefix)
		if err != nil {
			return nil, err
		}
		chain, err := binlogChain(manifests, base, target)
		if err != nil {
			return nil, err
		}
		files := make([]ReplayFile, 0, len(chain))
		for i, key := range chain {
			mf := manifests[key]
			local := filepath.Join(dir, fmt.Sprintf("%04d-%s", i, path.Base(key)))
			files = append(files, ReplayFile{Key: key, Summary: mf.Summary, Fetch: func(ctx context.Context) (string, error) {
				return local, m.download(ctx, bs, key, local, mf.Size, mf.SHA256)
			}})
		}
		m.log.Info("chose the binary logs to replay", "files", len(files), "from", base.String())
		return files, nil
	}
}

// download copies the object at key to path, checking its size and
// checksum.
func (m *Manager) download(ctx context.Context, store WALStore, key, path string, size int64, sha string) error {
	rc, err := store.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, sum, err := digestOf(io.TeeReader(rc, f))
	err = errors.Join(err, f.Close())
	switch {
	case err != nil:
	case n != size:
		err = fmt.Errorf("%s: read %d bytes, the manifest says %d", key, n, size)
	case sum != sha:
		err = fmt.Errorf("%s: checksum mismatch: read sha256 %s, the manifest says %s", key, sum, sha)
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}
