package instance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
)

// memStore is an in-memory bucket; Put keeps an object only when its whole
// stream arrived, like the real one.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	// refuse, when set, is what Put answers before it reads anything (as a
	// server refusing the key does).
	refuse error
}

func (s *memStore) Put(_ context.Context, key string, r io.Reader) (objectstore.Object, error) {
	if s.refuse != nil {
		return objectstore.Object{}, s.refuse
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return objectstore.Object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = b
	sum := sha256.Sum256(b)
	return objectstore.Object{Key: key, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}, nil
}

func (s *memStore) Get(_ context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return nil, objectstore.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (s *memStore) Stat(_ context.Context, key string) (objectstore.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return objectstore.Object{}, objectstore.ErrNotFound
	}
	return objectstore.Object{Key: key, Size: int64(len(b))}, nil
}

// backupDriver is the fake driver with backups: Backup writes data (after
// gate opens, when set); Restore reads the stream and keeps it as the data
// only when verify accepts it.
type backupDriver struct {
	*fakeDriver
	data     []byte
	gate     chan struct{}
	fail     error
	restored []byte
	restores int
	discards int
}

func (b *backupDriver) BackupFormat() string { return "fake-tar" }

func (b *backupDriver) Backup(_ context.Context, w io.Writer) (api.Position, error) {
	if b.gate != nil {
		<-b.gate
	}
	if _, err := w.Write(b.data); err != nil {
		return api.Position{}, err
	}
	return api.Position{LSN: "0/5000000", Timeline: 1}, b.fail
}

func (b *backupDriver) Restore(_ context.Context, r io.Reader, verify func() error) error {
	got, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	b.locked(func() { b.restores++ })
	if err := verify(); err != nil {
		return err
	}
	b.locked(func() { b.restored, b.hasData, b.sysID = got, true, "sys-restored" })
	return nil
}

func (b *backupDriver) DiscardRestore() error {
	b.locked(func() { b.discards++ })
	return nil
}

// call is a request to the manager as the controller.
func (h *harness) call(method, path string, body any) (int, string) {
	h.t.Helper()
	return h.callAs(testDatabase.Controller(), method, path, body)
}

// callAs is a request to the manager with creds' certificate (nil: none).
func (h *harness) callAs(creds *api.Credentials, method, path string, body any) (int, string) {
	h.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		b, _ := json.Marshal(v)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "https://"+h.addr+path, rd)
	resp, err := httpsClient(creds, h.m.opts.Name).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func operation(t *testing.T, body string) api.Operation {
	t.Helper()
	var op api.Operation
	if err := json.Unmarshal([]byte(body), &op); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return op
}

func s3Object(key string) *api.S3Object {
	return &api.S3Object{Endpoint: "http://127.0.0.1:1", Bucket: "b", Key: key, AccessKeyID: "k", SecretAccessKey: "s"}
}

func withStore(st *memStore) func(*Options) {
	return func(o *Options) { o.OpenStore = func(api.S3Object) (ObjectStore, error) { return st, nil } }
}

func TestBackupStreamsToTheStoreOneAtATime(t *testing.T) {
	st := &memStore{objects: map[string][]byte{}}
	driver := &backupDriver{fakeDriver: &fakeDriver{}, data: []byte("a consistent backup"), gate: make(chan struct{})}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-1", withStore(st))
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a running replica", func(s api.Status) bool { return s.EngineRunning })

	for body, want := range map[string]int{
		`{"id":`:                             http.StatusBadRequest,
		`{"destination":{}}`:                 http.StatusUnprocessableEntity,
		`{"id":"x","destination":{"s3":{}}}`: http.StatusUnprocessableEntity,
		`{"id":"../x","destination":{}}`:     http.StatusUnprocessableEntity,
	} {
		if code, msg := h.call("POST", "/v1/backups", body); code != want {
			t.Errorf("POST %s: %d %s, want %d", body, code, msg, want)
		}
	}
	if code, msg := h.call("POST", "/v1/backups", `{"id":"x","destination":{"s3":{}}}`); !strings.Contains(msg, "destination.s3.bucket: Required value") {
		t.Errorf("422 without field paths: %d %s", code, msg)
	}
	if code := h.get("/v1/backups/b1", nil); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated GET: %d", code)
	}
	// Backups are the controller's to ask for: not another instance's.
	if code := h.get("/v1/backups/b1", testDatabase.Instance("db-1")); code != http.StatusForbidden {
		t.Errorf("GET as an instance: %d, want 403", code)
	}

	req := api.BackupRequest{ID: "b1", Destination: api.Destination{S3: s3Object("db/b1")}}
	code, body := h.call("POST", "/v1/backups", req)
	if op := operation(t, body); code != http.StatusAccepted || op.Phase != api.OperationRunning || op.Role != api.RoleReplica || op.Format != "fake-tar" {
		t.Fatalf("POST: %d %+v", code, op)
	}
	if code, _ := h.call("POST", "/v1/backups", req); code != http.StatusOK {
		t.Errorf("the same ID again: %d, want 200", code)
	}
	if code, msg := h.call("POST", "/v1/backups", api.BackupRequest{ID: "b2", Destination: api.Destination{S3: s3Object("db/b2")}}); code != http.StatusConflict {
		t.Errorf("another ID while one runs: %d %s, want 409", code, msg)
	}
	close(driver.gate)
	s := h.wait("the backup done", func(s api.Status) bool { return s.Backup != nil && s.Backup.Phase != api.OperationRunning })
	sum := sha256.Sum256(driver.data)
	if b := s.Backup; b.Phase != api.OperationSucceeded || b.Size != int64(len(driver.data)) || b.Bytes != b.Size ||
		b.SHA256 != hex.EncodeToString(sum[:]) || b.Position == nil || b.Position.LSN != "0/5000000" || b.FinishTime == nil {
		t.Errorf("backup %+v", b)
	}
	if string(st.objects["db/b1"]) != string(driver.data) {
		t.Errorf("stored %q", st.objects["db/b1"])
	}
	if code, body := h.call("GET", "/v1/backups/b1", nil); code != http.StatusOK || operation(t, body).Phase != api.OperationSucceeded {
		t.Errorf("GET: %d %s", code, body)
	}
	if code, _ := h.call("GET", "/v1/backups/nope", nil); code != http.StatusNotFound {
		t.Errorf("GET of an unknown backup: %d", code)
	}

	// A failing engine tool fails the backup and stores nothing.
	driver.locked(func() { driver.gate, driver.fail = nil, errors.New("tool died") })
	if code, _ := h.call("POST", "/v1/backups", api.BackupRequest{ID: "b3", Destination: api.Destination{S3: s3Object("db/b3")}}); code != http.StatusAccepted {
		t.Fatalf("POST b3: %d", code)
	}
	s = h.wait("the backup failed", func(s api.Status) bool {
		return s.Backup != nil && s.Backup.ID == "b3" && s.Backup.Phase != api.OperationRunning
	})
	if s.Backup.Phase != api.OperationFailed || !strings.Contains(s.Backup.Message, "tool died") {
		t.Errorf("backup %+v", s.Backup)
	}
	if _, ok := st.objects["db/b3"]; ok {
		t.Error("a failed backup left an object")
	}
}

func TestARefusedUploadIsTheBackupsFailure(t *testing.T) {
	st := &memStore{objects: map[string][]byte{}, refuse: errors.New("InvalidAccessKeyId: the access key does not exist")}
	driver := &backupDriver{fakeDriver: &fakeDriver{}, data: bytes.Repeat([]byte("x"), 1<<20)}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", withStore(st))
	h.src <- Topology{Primary: "db-0"}
	h.wait("a running primary", func(s api.Status) bool { return s.EngineRunning })
	if code, _ := h.call("POST", "/v1/backups", api.BackupRequest{ID: "b1", Destination: api.Destination{S3: s3Object("db/b1")}}); code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	s := h.wait("the backup failed", func(s api.Status) bool { return s.Backup != nil && s.Backup.Phase != api.OperationRunning })
	if s.Backup.Phase != api.OperationFailed || !strings.HasPrefix(s.Backup.Message, "InvalidAccessKeyId") {
		t.Errorf("the store's refusal must lead the message: %+v", s.Backup)
	}
}

func TestBackupsOfAnEngineWithoutThemAreNotImplemented(t *testing.T) {
	driver := &fakeDriver{}
	h := startManagerWith(t, driver, driver, "db-0", func(o *Options) { o.Engine = "sqlite" })
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a running primary", func(s api.Status) bool { return s.Ready })
	for _, dest := range []api.Destination{{S3: s3Object("k")}, {Volume: &api.VolumeObject{Address: "127.0.0.1:8000", Claim: "b1-dump"}}} {
		code, msg := h.call("POST", "/v1/backups", api.BackupRequest{ID: "b1", Destination: dest})
		if code != http.StatusNotImplemented || !strings.Contains(msg, "backups are not supported for sqlite yet") {
			t.Errorf("POST to %s: %d %s", where(dest), code, msg)
		}
	}
}

func TestBackupDestinationIsExactlyOneOfS3AndVolume(t *testing.T) {
	driver := &backupDriver{fakeDriver: &fakeDriver{}}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", func(*Options) {})
	h.src <- Topology{Primary: "db-0"}
	h.wait("a running primary", func(s api.Status) bool { return s.EngineRunning })
	for body, want := range map[string]string{
		`{"id":"x","destination":{}}`: "destination: Required value: exactly one of s3 and volume",
		`{"id":"x","destination":{"s3":{"endpoint":"http://s3","bucket":"b","key":"k","accessKeyID":"a","secretAccessKey":"s"},"volume":{"address":"127.0.0.1:8000"}}}`: "destination.volume: Forbidden",
		`{"id":"x","destination":{"volume":{"address":"nowhere"}}}`: "destination.volume.address: Invalid value",
	} {
		if code, msg := h.call("POST", "/v1/backups", body); code != http.StatusUnprocessableEntity || !strings.Contains(msg, want) {
			t.Errorf("POST %s: %d %s, want 422 %q", body, code, msg, want)
		}
	}
}

func TestBackupToADumpServer(t *testing.T) {
	dir := t.TempDir()
	driver := &backupDriver{fakeDriver: &fakeDriver{}, data: bytes.Repeat([]byte("consistent "), 100000)}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", func(*Options) {})
	h.src <- Topology{Primary: "db-0"}
	h.wait("a running primary", func(s api.Status) bool { return s.EngineRunning })
	address := startDumpServer(t, dir, false)
	if code, msg := h.call("POST", "/v1/backups", api.BackupRequest{ID: "b1", Destination: api.Destination{Volume: &api.VolumeObject{Address: address, Server: "dump-0", Claim: "b1-dump"}}}); code != http.StatusAccepted {
		t.Fatalf("POST: %d %s", code, msg)
	}
	s := h.wait("the backup done", func(s api.Status) bool { return s.Backup != nil && s.Backup.Phase != api.OperationRunning })
	// The manager and the server authenticate each other with
	// certificates of the database's issuer.
	sum := sha256.Sum256(driver.data)
	if b := s.Backup; b.Phase != api.OperationSucceeded || b.Size != int64(len(driver.data)) || b.SHA256 != hex.EncodeToString(sum[:]) || !strings.Contains(b.Message, "pvc://b1-dump") {
		t.Errorf("backup %+v", b)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, dumpFile)); !bytes.Equal(data, driver.data) {
		t.Errorf("the claim holds %d bytes, want the %d of the backup", len(data), len(driver.data))
	}
}

func TestRestoreLoadsOnlyAVerifiedBackupThenServes(t *testing.T) {
	dump := []byte("the backup's bytes")
	sum := sha256.Sum256(dump)
	st := &memStore{objects: map[string][]byte{"db/full": dump, "db/corrupt": []byte("the backup'X bytes")}}
	driver := &backupDriver{fakeDriver: &fakeDriver{}}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", func(o *Options) { o.Restore = true; withStore(st)(o) })

	req := api.RestoreRequest{ID: "r1", Source: api.Destination{S3: s3Object("db/corrupt")}, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(dump))}
	if code, msg := h.call("POST", "/v1/restore", req); code != http.StatusConflict || !strings.Contains(msg, "no topology yet") {
		t.Errorf("POST before a topology: %d %s", code, msg)
	}
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	s := h.wait("awaiting the restore", func(s api.Status) bool { return s.AwaitingRestore })
	if s.Ready || s.EngineRunning || !strings.Contains(s.Reason, "waiting for its restore") {
		t.Errorf("status %+v", s)
	}
	if code, _ := h.call("GET", "/v1/restore", nil); code != http.StatusNotFound {
		t.Errorf("GET before a restore: %d", code)
	}
	for name, bad := range map[string]api.RestoreRequest{
		"no checksum":  {ID: "x", Source: req.Source, Size: 1},
		"no size":      {ID: "x", Source: req.Source, SHA256: req.SHA256},
		"other format": {ID: "x", Source: req.Source, SHA256: req.SHA256, Size: 1, Format: "mariadb-backup-xbstream"},
	} {
		if code, msg := h.call("POST", "/v1/restore", bad); code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s", name, code, msg)
		}
	}

	// Same size, other bytes: the checksum fails the load.
	if code, body := h.call("POST", "/v1/restore", req); code != http.StatusAccepted {
		t.Fatalf("POST: %d %s", code, body)
	}
	s = h.wait("the failed restore", func(s api.Status) bool {
		return s.Restore != nil && s.Restore.Phase == api.OperationFailed && s.AwaitingRestore
	})
	if !strings.Contains(s.Restore.Message, "checksum mismatch") || s.Ready || !strings.Contains(s.Reason, "checksum mismatch") {
		t.Errorf("status %+v, restore %+v", s, s.Restore)
	}
	if code, body := h.call("POST", "/v1/restore", req); code != http.StatusOK || operation(t, body).Phase != api.OperationFailed {
		t.Errorf("the failed ID again: %d %s", code, body)
	}
	// A truncated object fails before loading anything.
	st.objects["db/short"] = dump[:5]
	req.ID, req.Source.S3 = "r2", s3Object("db/short")
	if code, _ := h.call("POST", "/v1/restore", req); code != http.StatusAccepted {
		t.Fatal(code)
	}
	s = h.wait("the failed restore", func(s api.Status) bool { return s.Restore.ID == "r2" && s.Restore.Phase == api.OperationFailed })
	if !strings.Contains(s.Restore.Message, "holds 5 bytes, the backup 18") {
		t.Errorf("restore %+v", s.Restore)
	}
	var has bool
	driver.locked(func() { has = driver.hasData })
	if has || driver.bootstraps != 0 {
		t.Fatalf("data after failed restores: %v, bootstraps %d", has, driver.bootstraps)
	}

	req.ID, req.Source.S3 = "r3", s3Object("db/full")
	if code, _ := h.call("POST", "/v1/restore", req); code != http.StatusAccepted {
		t.Fatal(code)
	}
	s = h.wait("a ready restored primary", func(s api.Status) bool { return s.Ready })
	if s.AwaitingRestore || s.Restore.Phase != api.OperationSucceeded || s.Restore.Bytes != int64(len(dump)) || s.SystemIdentifier != "sys-restored" {
		t.Errorf("status %+v, restore %+v", s, s.Restore)
	}
	driver.locked(func() {
		if string(driver.restored) != string(dump) || driver.bootstraps != 0 || driver.discards != 1 {
			t.Errorf("restored %q, bootstraps %d, discards %d", driver.restored, driver.bootstraps, driver.discards)
		}
	})
	if code, msg := h.call("POST", "/v1/restore", api.RestoreRequest{ID: "r4", Source: req.Source, SHA256: req.SHA256, Size: req.Size}); code != http.StatusConflict || !strings.Contains(msg, "has data") {
		t.Errorf("a restore of a primary with data: %d %s", code, msg)
	}
}

func TestAReplicaStartedToRestoreClones(t *testing.T) {
	driver := &backupDriver{fakeDriver: &fakeDriver{}}
	st := &memStore{objects: map[string][]byte{}}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-1", func(o *Options) { o.Restore = true; withStore(st)(o) })
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	s := h.wait("a ready replica", func(s api.Status) bool { return s.Ready })
	if s.AwaitingRestore || s.Role != api.RoleReplica {
		t.Errorf("status %+v", s)
	}
	driver.locked(func() {
		if driver.clones != 1 || driver.restores != 0 {
			t.Errorf("clones %d, restores %d", driver.clones, driver.restores)
		}
	})
	code, msg := h.call("POST", "/v1/restore", api.RestoreRequest{ID: "r1", Source: api.Destination{S3: s3Object("k")}, SHA256: strings.Repeat("0", 64), Size: 1})
	if code != http.StatusConflict || !strings.Contains(msg, "replica") {
		t.Errorf("POST to a replica: %d %s", code, msg)
	}
}

// stalledStore takes a little of a backup's stream, then no more, until the
// upload is given up.
type stalledStore struct{ memStore }

func (s *stalledStore) Put(ctx context.Context, _ string, r io.Reader) (objectstore.Object, error) {
	if _, err := io.ReadFull(r, make([]byte, 1024)); err != nil {
		return objectstore.Object{}, err
	}
	<-ctx.Done()
	return objectstore.Object{}, ctx.Err()
}

// endlessBackup writes a backup that does not end, as a tool writes a large
// one, and says why it stopped.
type endlessBackup struct {
	*backupDriver
	ended chan error
}

func (e *endlessBackup) Backup(ctx context.Context, w io.Writer) (api.Position, error) {
	chunk := make([]byte, 32<<10)
	for {
		if _, err := w.Write(chunk); err != nil {
			e.ended <- err
			return api.Position{}, err
		}
	}
}

// TestABackupToAStalledDestinationIsGivenUp: a destination that stops
// taking the stream fails the backup once a write has waited StreamStall,
// and the engine's tool is stopped (its write fails), so it does not hold
// the engine's backup lock.
func TestABackupToAStalledDestinationIsGivenUp(t *testing.T) {
	driver := &endlessBackup{backupDriver: &backupDriver{fakeDriver: &fakeDriver{}}, ended: make(chan error, 1)}
	st := &stalledStore{memStore{objects: map[string][]byte{}}}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", func(o *Options) {
		o.StreamStall = 300 * time.Millisecond
		o.OpenStore = func(api.S3Object) (ObjectStore, error) { return st, nil }
	})
	h.src <- Topology{Primary: "db-0"}
	h.wait("a ready primary", func(s api.Status) bool { return s.Ready })
	if code, msg := h.call("POST", "/v1/backups", api.BackupRequest{ID: "b1", Destination: api.Destination{S3: s3Object("db/b1")}}); code != http.StatusAccepted {
		t.Fatalf("%d %s", code, msg)
	}
	select {
	case err := <-driver.ended:
		t.Logf("the tool's write failed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the backup still writes into a destination that took nothing for 10s")
	}
	s := h.wait("the backup failed", func(s api.Status) bool { return s.Backup != nil && s.Backup.Phase != api.OperationRunning })
	if s.Backup.Phase != api.OperationFailed || !strings.Contains(s.Backup.Message, "took no data for") {
		t.Errorf("backup %s: %s", s.Backup.Phase, s.Backup.Message)
	}
}
