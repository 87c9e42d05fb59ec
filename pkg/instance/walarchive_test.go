package instance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
)

// memWALStore is a bucket in memory that records digests as PutFile does.
type memWALStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	puts    int
	// delay makes each PutFile take that long; running and most count
	// the uploads under way, and the most at once.
	delay         time.Duration
	running, most int
	// gets counts the downloads of each key.
	gets map[string]int
}

func (s *memWALStore) PutFile(_ context.Context, key, path string) (objectstore.Object, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return objectstore.Object{}, err
	}
	s.mu.Lock()
	s.running++
	s.most = max(s.most, s.running)
	s.mu.Unlock()
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.objects[key] = b
	s.puts++
	n, sum, _ := digestOf(bytes.NewReader(b))
	return objectstore.Object{Key: key, Size: n, SHA256: sum}, nil
}

func (s *memWALStore) Stat(_ context.Context, key string) (objectstore.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return objectstore.Object{}, objectstore.ErrNotFound
	}
	n, sum, _ := digestOf(bytes.NewReader(b))
	return objectstore.Object{Key: key, Size: n, SHA256: sum}, nil
}

func (s *memWALStore) Get(_ context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gets == nil {
		s.gets = map[string]int{}
	}
	s.gets[key]++
	b, ok := s.objects[key]
	if !ok {
		return nil, objectstore.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func TestArchiveNeverOverwrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := NewManager(Options{Name: "db-0", ArchiveWAL: true, DataRoot: dir}, nil, nil)
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seg := "000000010000000000000003"
	if err := m.archiveFile(ctx, file(seg, "wal 3"), seg); err == nil || !strings.Contains(err.Error(), "no archive destination") {
		t.Fatalf("before PUT /v1/archive: %v", err)
	}
	store := &memWALStore{objects: map[string][]byte{}}
	m.archive.dest, m.archive.store = &api.S3Object{Key: "prod/shop"}, store
	if err := m.archiveFile(ctx, file("x", "x"), "../../etc/passwd"); err == nil {
		t.Error("a name that is not a WAL file's was archived")
	}
	// Through a symbolic link to the volume, as a physical working
	// directory would name it, a file is the volume's all the same.
	link := filepath.Join(t.TempDir(), "volume")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := m.underDataRoot(filepath.Join(link, seg)); err != nil {
		t.Errorf("through a link: %v", err)
	}
	for _, path := range []string{"/etc/passwd", dir + "/../etc/passwd", "relative/" + seg} {
		if err := m.archiveFile(ctx, path, seg); err == nil || !strings.Contains(err.Error(), "not a file of the data volume") {
			t.Errorf("archiving %s: %v, want a refusal", path, err)
		}
	}
	if err := m.archiveFile(ctx, file(seg, "wal 3"), seg); err != nil {
		t.Fatal(err)
	}
	if got := string(store.objects["prod/shop/wal/"+seg]); got != "wal 3" {
		t.Fatalf("archived %q", got)
	}
	// The engine did not see the upload end and hands the file over again.
	if err := m.archiveFile(ctx, file(seg, "wal 3"), seg); err != nil || store.puts != 1 {
		t.Errorf("the same file again: %v, %d uploads; want accepted without an upload", err, store.puts)
	}
	// Another database (or a forked timeline) with other bytes at the key.
	err := m.archiveFile(ctx, file(seg, "other wal 3"), seg)
	if err == nil || !strings.Contains(err.Error(), "never overwritten") || string(store.objects["prod/shop/wal/"+seg]) != "wal 3" {
		t.Errorf("other bytes at an archived key: %v, object %q", err, store.objects["prod/shop/wal/"+seg])
	}
	s := m.archive.snapshot()
	if s.Archived != 2 || s.Failed != 1 || s.LastArchived != seg || !strings.Contains(s.LastFailure, "never overwritten") {
		t.Errorf("status %+v", *s)
	}
}

func TestRecoverableTimeFollowsTheArchivedHeartbeats(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := NewManager(Options{Name: "db-0", ArchiveWAL: true, DataRoot: dir}, nil, nil)
	m.archive.dest, m.archive.store = &api.S3Object{Key: "p"}, &memWALStore{objects: map[string][]byte{}}
	t1, t2 := time.Unix(1000, 0), time.Unix(2000, 0)
	m.archive.heartbeats = []heartbeat{{t1, "000000010000000000000002"}, {t2, "000000010000000000000004"}}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("w"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		file string
		want *time.Time
	}{
		{"000000010000000000000001", nil},
		{"00000002.history", nil},
		{"000000010000000000000003", &t1},
		{"000000010000000000000004", &t2},
	} {
		if err := m.archiveFile(ctx, path, step.file); err != nil {
			t.Fatal(err)
		}
		got := m.archive.snapshot().LastRecoverableTime
		if (got == nil) != (step.want == nil) || got != nil && !got.Equal(*step.want) {
			t.Errorf("after %s: recoverable to %v, want %v", step.file, got, step.want)
		}
	}
	if len(m.archive.heartbeats) != 0 {
		t.Errorf("heartbeats left %+v", m.archive.heartbeats)
	}
}

func TestRestoreFileFetchesOnlyWhatTheArchiveHolds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := NewManager(Options{Name: "db-0", DataRoot: dir}, nil, nil)
	dest := filepath.Join(dir, "RECOVERYXLOG")
	if err := m.restoreFile(ctx, "000000010000000000000001", "/tmp/elsewhere"); err == nil || !strings.Contains(err.Error(), "not a file of the data volume") {
		t.Errorf("fetching to /tmp: %v, want a refusal", err)
	}
	if err := m.restoreFile(ctx, "000000010000000000000001", dest); err == nil {
		t.Error("fetched with no restore running")
	}
	store := &memWALStore{objects: map[string][]byte{"src/wal/000000010000000000000001": []byte("wal 1")}}
	err := m.withRestoreArchive(store, "src", func() error {
		if err := m.restoreFile(ctx, "000000010000000000000001", dest); err != nil {
			return err
		}
		if err := m.restoreFile(ctx, "00000002.history", dest+"2"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a file the archive lacks: %v, want os.ErrNotExist", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "wal 1" {
		t.Errorf("fetched %q", b)
	}
}

// Each segment the engine asks for starts the download of the next ones:
// a segment asked for later is moved into place, downloaded once; the end
// of the archive is still os.ErrNotExist, and the spool goes with the
// restore.
func TestRestoreFetchesTheNextSegmentsAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	m := NewManager(Options{Name: "db-0", DataRoot: dir}, nil, nil)
	store := &memWALStore{objects: map[string][]byte{}}
	// Across the boundary of a log file: segment FF, then the next log's 00.
	names := []string{"0000000100000000000000FE", "0000000100000000000000FF", "000000010000000100000000", "000000010000000100000001"}
	for _, n := range names {
		store.objects["src/wal/"+n] = []byte("wal " + n)
	}
	err := m.withRestoreArchive(store, "src", func() error {
		for _, n := range names {
			dest := filepath.Join(dir, "RECOVERYXLOG")
			if err := m.restoreFile(ctx, n, dest); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			if b, _ := os.ReadFile(dest); string(b) != "wal "+n {
				t.Errorf("%s: fetched %q", n, b)
			}
			if n == names[0] {
				// The next one is downloaded before it is asked for.
				next := "src/wal/" + names[1]
				if err := PollUntil(ctx, 10*time.Millisecond, func() error {
					store.mu.Lock()
					defer store.mu.Unlock()
					if store.gets[next] == 0 {
						return errors.New("not yet")
					}
					return nil
				}); err != nil {
					return err
				}
			}
		}
		if err := m.restoreFile(ctx, "000000010000000100000002", filepath.Join(dir, "RECOVERYXLOG")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the segment after the archive's last: %v, want os.ErrNotExist", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if got := store.gets["src/wal/"+n]; got != 1 {
			t.Errorf("%s downloaded %d times, want once", n, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, walPrefetchDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spool outlived the restore: %v", err)
	}
}

// archivingDriver is a driver whose engine's closed WAL files are in dir,
// all ready to be archived.
type archivingDriver struct {
	*fakeDriver
	dir   string
	ready []string
}

func (d *archivingDriver) ArchiveHeartbeat(context.Context) (string, error) { return "", nil }
func (d *archivingDriver) ReadyFiles() ([]string, error)                    { return d.ready, nil }
func (d *archivingDriver) WALDir() string                                   { return d.dir }
func (d *archivingDriver) ReceivedSegments() ([]string, error)              { return nil, nil }
func (d *archivingDriver) RestoreTo(context.Context, io.Reader, func() error, api.RecoveryTarget) error {
	return errors.New("no restores here")
}

func TestArchiveUploadsAheadOfTheEngine(t *testing.T) {
	ctx := context.Background()
	d := &archivingDriver{fakeDriver: &fakeDriver{}, dir: t.TempDir()}
	for i := 1; i <= 6; i++ {
		name := fmt.Sprintf("0000000100000000000000%02X", i)
		if err := os.WriteFile(filepath.Join(d.dir, name), []byte("wal "+name), 0o600); err != nil {
			t.Fatal(err)
		}
		d.ready = append(d.ready, name)
	}
	m := NewManager(Options{Name: "db-0", ArchiveWAL: true, ArchiveParallelism: 3, DataRoot: d.dir}, d, nil)
	store := &memWALStore{objects: map[string][]byte{}, delay: 50 * time.Millisecond}
	m.archive.dest, m.archive.store = &api.S3Object{Key: "p"}, store
	// The engine hands the files over one at a time, in order, each once
	// the one before was archived.
	for len(d.ready) > 0 {
		name := d.ready[0]
		if err := m.archiveFile(ctx, filepath.Join(d.dir, name), name); err != nil {
			t.Fatal(err)
		}
		d.ready = d.ready[1:]
	}
	if store.puts != 6 || len(store.objects) != 6 {
		t.Errorf("%d uploads of %d objects, want each of the 6 files once", store.puts, len(store.objects))
	}
	if store.most != 3 {
		t.Errorf("at most %d uploads at once, want 3", store.most)
	}
	for k, v := range store.objects {
		if string(v) != "wal "+filepath.Base(k) {
			t.Errorf("%s holds %q", k, v)
		}
	}
	if s := m.archive.snapshot(); s.Archived != 6 || s.LastArchived != "000000010000000000000006" {
		t.Errorf("status %+v", *s)
	}
}

func (s *memWALStore) Put(_ context.Context, key string, r io.Reader) (objectstore.Object, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return objectstore.Object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = b
	s.puts++
	n, sum, _ := digestOf(bytes.NewReader(b))
	return objectstore.Object{Key: key, Size: n, SHA256: sum}, nil
}

// A rotated key sent to the same archive replaces the one uploads use,
// and the status names the new credentials by their digest only.
func TestArchiveTakesRotatedCredentials(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stores := map[string]*memWALStore{}
	m := NewManager(Options{Name: "db-0", ArchiveWAL: true, DataRoot: dir, OpenStore: func(o api.S3Object) (ObjectStore, error) {
		if stores[o.AccessKeyID] == nil {
			stores[o.AccessKeyID] = &memWALStore{objects: map[string][]byte{}}
		}
		return stores[o.AccessKeyID], nil
	}}, nil, nil)
	put := func(id, secret string) api.ArchiveStatus {
		t.Helper()
		body, _ := json.Marshal(api.ArchiveRequest{Destination: api.S3Object{Endpoint: "http://127.0.0.1:9000", Bucket: "b", Key: "prod/shop", AccessKeyID: id, SecretAccessKey: secret}})
		rec := httptest.NewRecorder()
		m.putArchive(rec, httptest.NewRequest(http.MethodPut, api.PathArchive, bytes.NewReader(body)))
		var st api.ArchiveStatus
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &st) != nil {
			t.Fatalf("PUT %s: %d %s", api.PathArchive, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), secret) {
			t.Fatalf("the status holds the secret key: %s", rec.Body)
		}
		return st
	}
	archive := func(seg string) {
		t.Helper()
		p := filepath.Join(dir, seg)
		if err := os.WriteFile(p, []byte("wal "+seg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := m.archiveFile(ctx, p, seg); err != nil {
			t.Fatal(err)
		}
	}
	first := put("OLD", "old-secret")
	archive("000000010000000000000001")
	second := put("NEW", "new-secret")
	archive("000000010000000000000002")
	if first.Credentials == "" || first.Credentials == second.Credentials || first.Prefix != second.Prefix {
		t.Errorf("credentials %q then %q, prefix %q then %q: want other credentials, the same prefix", first.Credentials, second.Credentials, first.Prefix, second.Prefix)
	}
	if len(stores["OLD"].objects) != 1 || len(stores["NEW"].objects) != 1 || stores["NEW"].objects["prod/shop/wal/000000010000000000000002"] == nil {
		t.Errorf("uploads: %d with the old key, %d with the new; want the second file with the new key", len(stores["OLD"].objects), len(stores["NEW"].objects))
	}
	if s := m.archive.snapshot(); s.Archived != 2 {
		t.Errorf("the counts did not survive the rotation: %+v", *s)
	}
}
