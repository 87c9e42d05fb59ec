package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// The backup and restore endpoints (package api holds the contract) and
// the restore the loop runs.

// ObjectStore is what backups and restores need of a bucket
// (objectstore.Store).
type ObjectStore interface {
	Put(ctx context.Context, key string, r io.Reader) (objectstore.Object, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Stat(ctx context.Context, key string) (objectstore.Object, error)
}

// OpenS3 opens the bucket of o.
func OpenS3(o api.S3Object) (ObjectStore, error) {
	return objectstore.New(objectstore.Config{
		Endpoint: o.Endpoint, Region: o.Region, Bucket: o.Bucket,
		AccessKeyID: o.AccessKeyID, SecretAccessKey: o.SecretAccessKey, CABundle: o.CABundle,
	})
}

// errAwaitingRestore is an instance started with --restore and no data
// waiting for POST /v1/restore: expected, and shown in the status.
var errAwaitingRestore = errors.New("waiting for its restore (POST /v1/restore)")

// operations is the manager's record of backups and the restore, under
// Manager.mu.
type operations struct {
	backups map[string]*api.Operation
	// lastBackup is the ID of the backup running or last run; running
	// tells whether it still runs.
	lastBackup    string
	backupRunning bool
	// restore is the restore asked last; pending is its request until the
	// loop takes it up.
	restore *api.Operation
	pending *pendingRestore
}

type pendingRestore struct {
	req   api.RestoreRequest
	store ObjectStore
	// archive is the WAL archive a restore to a point replays.
	archive WALStore
}

func (o *operations) backupOp() *api.Operation {
	if op := o.backups[o.lastBackup]; op != nil {
		c := *op
		return &c
	}
	return nil
}

func (o *operations) restoreOp() *api.Operation {
	if o.restore == nil {
		return nil
	}
	c := *o.restore
	return &c
}

func (m *Manager) handleBackups(mux *http.ServeMux) {
	// Backups and restores are the controller's to ask for.
	controller := func(h http.HandlerFunc) http.HandlerFunc { return admit(h, pki.RoleController) }
	mux.HandleFunc("POST "+api.PathBackups, controller(m.postBackup))
	mux.HandleFunc("GET "+api.PathBackup, controller(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		op := m.ops.backups[r.PathValue("id")]
		var c api.Operation
		if op != nil {
			c = *op
		}
		m.mu.Unlock()
		if op == nil {
			http.Error(w, "no backup "+r.PathValue("id")+" is known to this instance", http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, c)
	}))
	mux.HandleFunc("POST "+api.PathRestore, controller(m.postRestore))
	mux.HandleFunc("GET "+api.PathRestore, controller(func(w http.ResponseWriter, _ *http.Request) {
		m.mu.Lock()
		op := m.ops.restoreOp()
		m.mu.Unlock()
		if op == nil {
			http.Error(w, "no restore was asked of this instance", http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, op)
	}))
}

func (m *Manager) postBackup(w http.ResponseWriter, r *http.Request) {
	var req api.BackupRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if errs := append(validateID(req.ID), validateDestination("destination", req.Destination)...); len(errs) > 0 {
		http.Error(w, strings.Join(errs, "; "), http.StatusUnprocessableEntity)
		return
	}
	b, ok := m.driver.(Backuper)
	if !ok {
		http.Error(w, fmt.Sprintf("backups are not supported for %s yet", m.opts.Engine), http.StatusNotImplemented)
		return
	}
	store, err := m.openStore(req.Destination)
	if err != nil {
		http.Error(w, "destination: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	m.mu.Lock()
	if op := m.ops.backups[req.ID]; op != nil {
		c := *op
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, c)
		return
	}
	if m.ops.backupRunning {
		running := m.ops.lastBackup
		m.mu.Unlock()
		http.Error(w, fmt.Sprintf("backup %s is running: one runs at a time", running), http.StatusConflict)
		return
	}
	if m.st.child == nil || m.st.fenced != "" || m.stopping {
		m.mu.Unlock()
		http.Error(w, "the engine is not running (or is fenced): no backup can be taken now", http.StatusConflict)
		return
	}
	op := &api.Operation{
		ID: req.ID, Phase: api.OperationRunning, Instance: m.opts.Name, Role: m.st.role,
		StartTime: time.Now().UTC(), Format: b.BackupFormat(),
	}
	if m.ops.backups == nil {
		m.ops.backups = map[string]*api.Operation{}
	}
	m.ops.backups[req.ID], m.ops.lastBackup, m.ops.backupRunning = op, req.ID, true
	c := *op
	m.mu.Unlock()
	m.log.Info("backup started", "id", req.ID, "role", c.Role, "to", where(req.Destination))
	go m.runBackup(b, store, req, op)
	writeJSON(w, http.StatusAccepted, c)
}

// runBackup streams the engine's backup into the object: nothing is staged
// on disk, and the object appears only when the whole stream arrived.
func (m *Manager) runBackup(b Backuper, store ObjectStore, req api.BackupRequest, op *api.Operation) {
	ctx, cancel := context.WithCancel(m.runContext())
	defer cancel()
	pr, pw := io.Pipe()
	type result struct {
		pos api.Position
		err error
	}
	done := make(chan result, 1)
	// A destination that stops taking the stream (a stalled S3 server or
	// dump server) would hold the engine's tool, and on a MySQL-family
	// primary its backup lock, which stops commits: once a write has
	// waited for DefaultBackupStall the upload is given up and the tool ends.
	watch := &stallWatch{w: pw}
	go watch.run(ctx, m.backupStall(), func(stalled time.Duration) {
		pr.CloseWithError(fmt.Errorf("the destination took no data for %s: the backup is given up", stalled.Round(100*time.Millisecond)))
		cancel()
	})
	go func() {
		pos, err := b.Backup(ctx, &progressWriter{w: watch, m: m, op: op})
		// A failed backup fails the upload, which then aborts.
		pw.CloseWithError(err)
		done <- result{pos, err}
	}()
	obj, putErr := store.Put(ctx, objectKey(req.Destination), pr)
	if putErr != nil {
		// The engine's tool stops on its next write.
		cancel()
		pr.CloseWithError(putErr)
	}
	res := <-done
	err := res.err
	switch {
	case putErr != nil && res.err == nil:
		err = putErr
	case putErr != nil && !strings.Contains(putErr.Error(), res.err.Error()):
		// The upload failed first (a refused key, a full bucket) and the
		// tool died of the closed pipe: the upload's error is the cause.
		err = fmt.Errorf("%w (the backup tool then stopped: %v)", putErr, res.err)
	}
	now := time.Now().UTC()
	m.mu.Lock()
	op.FinishTime = &now
	if err != nil {
		op.Phase, op.Message = api.OperationFailed, err.Error()
	} else {
		pos := res.pos
		op.Phase, op.Size, op.SHA256, op.Position = api.OperationSucceeded, obj.Size, obj.SHA256, &pos
		op.Message = fmt.Sprintf("%d bytes to %s in %s", obj.Size, where(req.Destination), now.Sub(op.StartTime).Round(time.Millisecond))
	}
	m.ops.backupRunning = false
	m.mu.Unlock()
	if err != nil {
		m.log.Error("backup failed", "id", req.ID, "err", err)
		return
	}
	m.log.Info("backup done", "id", req.ID, "bytes", obj.Size, "sha256", obj.SHA256, "seconds", now.Sub(op.StartTime).Seconds())
}

func (m *Manager) postRestore(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	errs := append(validateID(req.ID), validateDestination("source", req.Source)...)
	if !sha256Hex.MatchString(req.SHA256) {
		errs = append(errs, "sha256: Invalid value: must be 64 lowercase hexadecimal digits")
	}
	if req.Size <= 0 {
		errs = append(errs, "size: Invalid value: must be the backup's size in bytes, more than 0")
	}
	b, ok := m.driver.(Backuper)
	if ok && req.Format != "" && req.Format != b.BackupFormat() {
		errs = append(errs, fmt.Sprintf("format: Unsupported value: %q: a %s instance restores %q", req.Format, m.opts.Engine, b.BackupFormat()))
	}
	errs = append(errs, validateRecovery(req.Archive, req.Target)...)
	if len(errs) > 0 {
		http.Error(w, strings.Join(errs, "; "), http.StatusUnprocessableEntity)
		return
	}
	if !ok {
		http.Error(w, fmt.Sprintf("restores are not supported for %s yet", m.opts.Engine), http.StatusNotImplemented)
		return
	}
	_, walPITR := m.driver.(WALArchiver)
	_, binlogPITR := m.driver.(BinlogArchiver)
	if req.Target != nil && !walPITR && !binlogPITR {
		http.Error(w, fmt.Sprintf("restores to a point are not supported for %s yet", m.opts.Engine), http.StatusNotImplemented)
		return
	}
	if req.Target != nil && binlogPITR && req.Target.LSN != "" {
		http.Error(w, fmt.Sprintf("target.lsn: Forbidden: an LSN is PostgreSQL's; a %s restore goes to a time, a GTID or the latest", m.opts.Engine), http.StatusUnprocessableEntity)
		return
	}
	if req.Target != nil && !binlogPITR && req.Target.GTID != "" {
		http.Error(w, fmt.Sprintf("target.gtid: Forbidden: a GTID is MariaDB's and MySQL's; a %s restore goes to a time, an LSN or the latest", m.opts.Engine), http.StatusUnprocessableEntity)
		return
	}
	store, err := m.openStore(req.Source)
	if err != nil {
		http.Error(w, "source: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	var archive WALStore
	if req.Archive != nil {
		if archive, err = m.openWALStore(*req.Archive); err != nil {
			http.Error(w, "archive: "+err.Error(), http.StatusUnprocessableEntity)
			return
		}
	}
	m.mu.Lock()
	if op := m.ops.restore; op != nil && op.ID == req.ID {
		c := *op
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, c)
		return
	}
	if op := m.ops.restore; op != nil && op.Phase == api.OperationRunning {
		m.mu.Unlock()
		http.Error(w, fmt.Sprintf("restore %s is running", op.ID), http.StatusConflict)
		return
	}
	if !m.st.awaitingRestore {
		why := "it was not started with --restore"
		switch {
		case m.opts.Restore && m.st.role == api.RoleReplica:
			why = "it is a replica, which clones from its primary"
		case m.opts.Restore && m.st.role == api.RoleWaiting:
			why = "it has no topology yet"
		case m.opts.Restore:
			why = "it has data"
		}
		m.mu.Unlock()
		http.Error(w, "the instance does not await a restore: "+why, http.StatusConflict)
		return
	}
	op := &api.Operation{ID: req.ID, Phase: api.OperationRunning, Instance: m.opts.Name, Role: m.st.role,
		StartTime: time.Now().UTC(), Format: b.BackupFormat(), Size: req.Size, SHA256: req.SHA256}
	m.ops.restore, m.ops.pending = op, &pendingRestore{req: req, store: store, archive: archive}
	c := *op
	m.mu.Unlock()
	m.wakeLoop()
	writeJSON(w, http.StatusAccepted, c)
}

// restoreOrAwait runs the restore asked for, or says the instance awaits
// one. It is called from the loop for a primary started with --restore
// that has no data.
func (m *Manager) restoreOrAwait(ctx context.Context) error {
	b, ok := m.driver.(Backuper)
	if !ok {
		return fmt.Errorf("restores are not supported for %s yet", m.opts.Engine)
	}
	m.mu.Lock()
	p := m.ops.pending
	m.ops.pending = nil
	first := !m.st.awaitingRestore
	if p != nil {
		m.st.awaitingRestore = false
	}
	op := m.ops.restore
	m.mu.Unlock()
	if p == nil {
		if first {
			// Whatever a load that was interrupted (a crash, a kill) left
			// goes, before the instance says it awaits a restore: the next
			// one starts from a clean directory.
			m.log.Info("no data: waiting for a restore")
			if err := b.DiscardRestore(); err != nil {
				return err
			}
			m.mu.Lock()
			m.st.awaitingRestore = true
			m.mu.Unlock()
		}
		return errAwaitingRestore
	}
	m.log.Info("restoring", "id", p.req.ID, "from", where(p.req.Source), "bytes", p.req.Size)
	err := m.load(ctx, b, p, op)
	now := time.Now().UTC()
	m.mu.Lock()
	op.FinishTime = &now
	if err != nil {
		op.Phase, op.Message = api.OperationFailed, err.Error()
		m.st.awaitingRestore = true
	} else {
		op.Phase = api.OperationSucceeded
		op.Message = fmt.Sprintf("%d bytes from %s in %s", op.Bytes, where(p.req.Source), now.Sub(op.StartTime).Round(time.Millisecond))
	}
	m.mu.Unlock()
	if err != nil {
		m.log.Error("restore failed: the instance has no data and waits for a restore", "id", p.req.ID, "err", err)
		return fmt.Errorf("restore %s failed: %w", p.req.ID, err)
	}
	m.log.Info("restored", "id", p.req.ID, "bytes", p.req.Size, "seconds", now.Sub(op.StartTime).Seconds())
	return nil
}

// notAwaitingRestore clears the wait for a restore of an instance that is
// no longer a primary without data, and fails a restore asked for but not
// started.
func (m *Manager) notAwaitingRestore(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.awaitingRestore = false
	if m.ops.pending == nil {
		return
	}
	now := time.Now().UTC()
	op := m.ops.restore
	op.Phase, op.Message, op.FinishTime = api.OperationFailed, "not started: "+why, &now
	m.ops.pending = nil
}

// load streams the object into the engine's Restore, which lets the data
// in only once the whole stream matched the backup's size and digest.
func (m *Manager) load(ctx context.Context, b Backuper, p *pendingRestore, op *api.Operation) error {
	key := where(p.req.Source)
	stat, err := p.store.Stat(ctx, objectKey(p.req.Source))
	if err != nil {
		return err
	}
	if stat.Size != p.req.Size {
		return fmt.Errorf("the object %s holds %d bytes, the backup %d", key, stat.Size, p.req.Size)
	}
	rc, err := p.store.Get(ctx, objectKey(p.req.Source))
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	in := &progressReader{r: io.TeeReader(rc, h), m: m, op: op}
	verify := func() error {
		if in.n != p.req.Size {
			return fmt.Errorf("read %d bytes of %s, the backup has %d", in.n, key, p.req.Size)
		}
		if sum := hex.EncodeToString(h.Sum(nil)); sum != p.req.SHA256 {
			return fmt.Errorf("checksum mismatch: %s has sha256 %s, the backup %s", key, sum, p.req.SHA256)
		}
		return nil
	}
	verified := false
	verifyOnce := func() error { verified = true; return verify() }
	switch ba, binlogs := m.driver.(BinlogArchiver); {
	case p.req.Target != nil && binlogs:
		err = ba.RestoreToBinlogs(ctx, in, verifyOnce, *p.req.Target, m.fetchBinlogs(p.archive, p.req.Archive.Key, *p.req.Target))
	case p.req.Target != nil:
		err = m.withRestoreArchive(p.archive, p.req.Archive.Key, func() error {
			return m.driver.(WALArchiver).RestoreTo(ctx, in, verifyOnce, *p.req.Target)
		})
	default:
		err = b.Restore(ctx, in, verifyOnce)
	}
	if err != nil && !verified && ctx.Err() == nil {
		// The engine's tool gave up before the end (mbstream checks its
		// chunks): when the object is not the backup, that is the cause.
		if _, derr := io.Copy(io.Discard, in); derr == nil {
			if verr := verify(); verr != nil {
				return fmt.Errorf("%w (%v)", verr, err)
			}
		}
	}
	return err
}

func (m *Manager) openStore(d api.Destination) (ObjectStore, error) {
	if d.Volume != nil {
		return OpenDump(d.Volume.Address, api.Auth{Credentials: m.opts.Identity.Credentials(), Name: d.Volume.Server}), nil
	}
	if m.opts.OpenStore != nil {
		return m.opts.OpenStore(*d.S3)
	}
	return OpenS3(*d.S3)
}

func (m *Manager) runContext() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runCtx == nil {
		return context.Background()
	}
	return m.runCtx
}

// wakeLoop makes the loop reconcile now rather than at its next tick.
func (m *Manager) wakeLoop() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// progressWriter and progressReader count the bytes streamed into the
// operation, for the status.
// stallWatch is a writer that knows how long its current write has been
// blocked.
type stallWatch struct {
	w     io.Writer
	mu    sync.Mutex
	since time.Time // when the write under way began; zero between writes
}

func (s *stallWatch) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.since = time.Now()
	s.mu.Unlock()
	n, err := s.w.Write(p)
	s.mu.Lock()
	s.since = time.Time{}
	s.mu.Unlock()
	return n, err
}

// run calls stalled, once, when a write has been blocked for stall, and
// returns then or when ctx ends.
func (s *stallWatch) run(ctx context.Context, stall time.Duration, stalled func(time.Duration)) {
	tick := time.NewTicker(max(stall/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		since := s.since
		s.mu.Unlock()
		if !since.IsZero() && time.Since(since) >= stall {
			stalled(time.Since(since))
			return
		}
	}
}

type progressWriter struct {
	w  io.Writer
	m  *Manager
	op *api.Operation
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.m.mu.Lock()
	p.op.Bytes += int64(n)
	p.m.mu.Unlock()
	return n, err
}

type progressReader struct {
	r  io.Reader
	n  int64
	m  *Manager
	op *api.Operation
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	p.m.mu.Lock()
	p.op.Bytes = p.n
	p.m.mu.Unlock()
	return n, err
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// operationID is a Kubernetes UID or a name.
	operationID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

func validateID(id string) []string {
	switch {
	case id == "":
		return []string{"id: Required value"}
	case !operationID.MatchString(id):
		return []string{fmt.Sprintf("id: Invalid value: %q: must be 1-128 letters, digits, '.', '_' or '-'", id)}
	}
	return nil
}

// validateDestination checks that exactly one of s3 and volume is set, and
// that one.
func validateDestination(path string, d api.Destination) []string {
	switch {
	case d.S3 == nil && d.Volume == nil:
		return []string{path + ": Required value: exactly one of s3 and volume"}
	case d.S3 != nil && d.Volume != nil:
		return []string{path + ".volume: Forbidden: may not be set with s3"}
	case d.Volume != nil:
		if _, _, err := net.SplitHostPort(d.Volume.Address); err != nil {
			return []string{fmt.Sprintf("%s.volume.address: Invalid value: %q: must be host:port", path, d.Volume.Address)}
		}
		return nil
	}
	return validateS3(path+".s3", d.S3)
}

// validateRecovery checks that a restore names an archive and a target
// together, and exactly one kind of target.
func validateRecovery(archive *api.S3Object, target *api.RecoveryTarget) []string {
	switch {
	case archive == nil && target == nil:
		return nil
	case archive == nil:
		return []string{"archive: Required value: a target needs the archive to replay"}
	case target == nil:
		return []string{"target: Required value: an archive is replayed to a target (time, lsn, gtid or latest)"}
	}
	errs := validateS3("archive", archive)
	set := 0
	if target.Time != nil {
		set++
	}
	if target.LSN != "" {
		set++
		if !lsnPattern.MatchString(target.LSN) {
			errs = append(errs, fmt.Sprintf("target.lsn: Invalid value: %q: must be an LSN such as 0/3000148", target.LSN))
		}
	}
	if target.GTID != "" {
		set++
		if _, err := binlog.ParseGTID(target.GTID); err != nil {
			errs = append(errs, "target.gtid: Invalid value: "+err.Error())
		}
	}
	if target.Latest {
		set++
	}
	if set != 1 {
		errs = append(errs, "target: Invalid value: exactly one of time, lsn, gtid and latest must be set")
	}
	return errs
}

var lsnPattern = regexp.MustCompile(`^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$`)

func validateS3(path string, o *api.S3Object) []string {
	var errs []string
	for field, v := range map[string]string{"endpoint": o.Endpoint, "bucket": o.Bucket, "key": o.Key,
		"accessKeyID": o.AccessKeyID, "secretAccessKey": o.SecretAccessKey} {
		if v == "" {
			errs = append(errs, path+"."+field+": Required value")
		}
	}
	if strings.HasSuffix(o.Key, "/") {
		errs = append(errs, fmt.Sprintf("%s.key: Invalid value: %q: must name an object, not end in /", path, o.Key))
	}
	slices.Sort(errs)
	return errs
}

// decodeJSON reads a request body into v, answering 400 when it is not
// JSON of v's type.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v); err != nil {
		http.Error(w, "malformed request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// where says where a destination is, for logs and messages.
func where(d api.Destination) string {
	switch {
	case d.S3 != nil:
		return "s3://" + d.S3.Bucket + "/" + d.S3.Key
	case d.Volume != nil:
		return "pvc://" + d.Volume.Claim
	}
	return ""
}

// objectKey is the destination's object key ("dump" for a claim, which
// holds one).
func objectKey(d api.Destination) string {
	if d.S3 != nil {
		return d.S3.Key
	}
	return dumpFile
}
