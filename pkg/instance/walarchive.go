package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Continuous archiving: the engine hands each closed WAL file to the
// manager through a unix socket (mydb-instance wal-archive, the engine's
// archive_command), and the manager uploads it to the archive the
// controller named (PUT /v1/archive). A restore to a point fetches them
// back the same way (wal-restore, the restore_command). The credentials
// stay in the manager's memory: nothing the engine runs sees them.

// WALArchiver is a driver whose engine archives its WAL through the
// manager and restores to a point from such an archive.
type WALArchiver interface {
	// ArchiveHeartbeat commits a transaction that changes nothing, so the
	// archive holds a commit at about now even on an idle database. It
	// returns the WAL file that holds the commit.
	ArchiveHeartbeat(ctx context.Context) (walFile string, err error)
	// ReadyFiles names the closed files waiting to be archived, in the
	// order the engine hands them over; WALDir is where they are.
	ReadyFiles() ([]string, error)
	WALDir() string
	// ReceivedSegments are the paths of the closed WAL segments the engine
	// will not archive itself: those it received from a primary as a
	// replica. After a promotion, the ones the old primary had not
	// archived yet exist only here.
	ReceivedSegments() ([]string, error)
	// RestoreTo is Backuper.Restore, then a replay of the archive (fetched
	// through the restore command) up to target, after which the data is a
	// primary of its own on a new timeline.
	RestoreTo(ctx context.Context, r io.Reader, verify func() error, target api.RecoveryTarget) error
}

// WALStore is what the archive needs of a bucket (objectstore.Store).
type WALStore interface {
	PutFile(ctx context.Context, key, path string) (objectstore.Object, error)
	Stat(ctx context.Context, key string) (objectstore.Object, error)
	Get(ctx context.Context, key string) (io.ReadCloser, error)
}

// DefaultArchiveTimeout is how often an idle primary's WAL is closed and
// archived (with a heartbeat commit), so the recoverable window advances.
const DefaultArchiveTimeout = 5 * time.Minute

// walFileName is what the engine may hand over: a segment, a partial
// segment of an old timeline, a backup label or a timeline history file.
var walFileName = regexp.MustCompile(`^([0-9A-F]{24}(\.partial|\.[0-9A-F]{8}\.backup)?|[0-9A-F]{8}\.history)$`)

// segmentName is a whole segment's name: timeline, log, segment.
var segmentName = regexp.MustCompile(`^[0-9A-F]{24}$`)

// ArchiveURL names an archive by its endpoint, bucket and prefix, which is
// how the controller tells whether a manager archives where it should.
func ArchiveURL(o api.S3Object) string {
	return strings.TrimSuffix(o.Endpoint, "/") + "/" + o.Bucket + "/" + o.Key
}

// ArchiveCredentials is a digest of what o's uploads authenticate and
// trust with (region, access key, CA bundle), so the controller can tell a
// manager that holds a rotated-out key without anyone sending the key
// back. 128 bits of SHA-256 over a domain-separated encoding.
func ArchiveCredentials(o api.S3Object) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte("mydb archive credentials v1"), []byte(o.Region), []byte(o.AccessKeyID), []byte(o.SecretAccessKey), o.CABundle} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// WALKey is the object key of WAL file name in the archive at prefix.
func WALKey(prefix, name string) string { return prefix + "/wal/" + name }

// walArchive is the manager's archive state, under its own lock (uploads
// run for as long as they take; status reads must not wait for them).
type walArchive struct {
	mu     sync.Mutex
	dest   *api.S3Object
	store  WALStore
	status api.ArchiveStatus
	// heartbeats are commits waiting for their file to be archived.
	heartbeats []heartbeat
	// ahead are the uploads started before the engine asked for their
	// files (Options.ArchiveParallelism), by file name.
	ahead map[string]*upload
	// restoreFrom is the archive a restore to a point reads, while it runs,
	// and the segments fetched ahead of the engine's requests.
	restoreFrom       WALStore
	restoreFromPrefix string
	prefetch          *walPrefetch
}

// upload is a file's upload started ahead of the engine's request.
type upload struct {
	key   string
	began time.Time
	done  chan struct{}
	err   error
}

type heartbeat struct {
	at   time.Time
	file string
}

func (a *walArchive) snapshot() *api.ArchiveStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	return &s
}

func (m *Manager) handleArchive(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+api.PathArchive, admit(m.putArchive, pki.RoleController))
}

func (m *Manager) putArchive(w http.ResponseWriter, r *http.Request) {
	var req api.ArchiveRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if !m.opts.ArchiveWAL {
		http.Error(w, "this instance does not archive its WAL (it was started without --wal-archive)", http.StatusNotImplemented)
		return
	}
	if errs := validateS3("destination", &req.Destination); len(errs) > 0 {
		http.Error(w, strings.Join(errs, "; "), http.StatusUnprocessableEntity)
		return
	}
	store, err := m.openWALStore(req.Destination)
	if err != nil {
		http.Error(w, "destination: "+err.Error(), http.StatusUnprocessableEntity)
		return
	}
	a := &m.archive
	a.mu.Lock()
	d := req.Destination
	credentials := ArchiveCredentials(d)
	switch {
	case a.dest == nil || where(api.Destination{S3: a.dest}) != where(api.Destination{S3: &d}):
		m.log.Info("archiving WAL", "to", where(api.Destination{S3: &d}))
	case a.status.Credentials != credentials:
		// Uploads under way finish with the store they began with.
		m.log.Info("archiving WAL with new credentials", "to", where(api.Destination{S3: &d}))
	}
	a.dest, a.store = &d, store
	a.status.Configured = true
	a.status.Prefix = ArchiveURL(d)
	a.status.Credentials = credentials
	s := a.status
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, s)
}

func (m *Manager) openWALStore(o api.S3Object) (WALStore, error) {
	var (
		st  ObjectStore
		err error
	)
	if m.opts.OpenStore != nil {
		st, err = m.opts.OpenStore(o)
	} else {
		st, err = OpenS3(o)
	}
	if err != nil {
		return nil, err
	}
	ws, ok := st.(WALStore)
	if !ok {
		return nil, fmt.Errorf("the store of %s cannot keep a WAL archive", o.Endpoint)
	}
	return ws, nil
}

// archiveFile uploads the engine's closed WAL file at path. An object
// already at its key is accepted only when it holds the same bytes (an
// upload the engine did not see end): the archive is never overwritten.
func (m *Manager) archiveFile(ctx context.Context, path, name string) error {
	if err := m.checkLocalFile(name, path); err != nil {
		return err
	}
	a := &m.archive
	a.mu.Lock()
	dest, store := a.dest, a.store
	a.mu.Unlock()
	if dest == nil {
		return errors.New("no archive destination yet (the controller sends it): the engine keeps the file and retries")
	}
	began := time.Now().UTC()
	var err error
	up := m.takeAhead(ctx, name)
	// Keep ArchiveParallelism uploads going while the engine waits for
	// this one, whether it was started ahead or not.
	m.uploadAhead(dest, store, name)
	if up != nil && up.err == nil && up.key == WALKey(dest.Key, name) {
		began = up.began
	} else {
		err = m.uploadWAL(ctx, store, WALKey(dest.Key, name), path)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.status.Failed++
		a.status.LastFailure, a.status.LastFailureTime = fmt.Sprintf("%s: %v", name, err), &began
		return err
	}
	a.status.Archived++
	a.status.LastArchived, a.status.LastArchivedTime = name, &began
	if segmentName.MatchString(name) {
		// Archived in order: every heartbeat in this file or an earlier
		// one is in the archive now.
		kept := a.heartbeats[:0]
		for _, hb := range a.heartbeats {
			if hb.file <= name {
				at := hb.at
				a.status.LastRecoverableTime = &at
				continue
			}
			kept = append(kept, hb)
		}
		a.heartbeats = kept
	}
	return nil
}

// takeAhead waits for the upload of name started ahead, if there is one,
// and forgets it.
func (m *Manager) takeAhead(ctx context.Context, name string) *upload {
	a := &m.archive
	a.mu.Lock()
	up := a.ahead[name]
	delete(a.ahead, name)
	a.mu.Unlock()
	if up == nil {
		return nil
	}
	select {
	case <-up.done:
		return up
	case <-ctx.Done():
		return &upload{err: ctx.Err()}
	}
}

// uploadAhead starts uploading the files the engine will hand over after
// name, so that up to ArchiveParallelism uploads run at once while the
// engine hands them over one at a time. Each is checked as any other (an
// object already there must hold the same bytes); the engine's request for
// it then waits for it, or uploads it again if it failed.
func (m *Manager) uploadAhead(dest *api.S3Object, store WALStore, name string) {
	room := m.opts.ArchiveParallelism - 1
	wa, ok := m.driver.(WALArchiver)
	if room <= 0 || !ok {
		return
	}
	ready, err := wa.ReadyFiles()
	if err != nil {
		return
	}
	a := &m.archive
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ahead == nil {
		a.ahead = map[string]*upload{}
	}
	for n, up := range a.ahead {
		// Ones the engine will not ask for any more (it archived them
		// some other way, or its archive was reset) free their slot.
		select {
		case <-up.done:
			if n < name {
				delete(a.ahead, n)
			}
		default:
		}
	}
	for _, next := range ready {
		if len(a.ahead) >= room {
			return
		}
		if next <= name || a.ahead[next] != nil || !segmentName.MatchString(next) {
			continue
		}
		up := &upload{key: WALKey(dest.Key, next), began: time.Now().UTC(), done: make(chan struct{})}
		a.ahead[next] = up
		go func(next string) {
			defer close(up.done)
			up.err = m.uploadWAL(m.runContext(), store, up.key, filepath.Join(wa.WALDir(), next))
		}(next)
	}
}

func (m *Manager) uploadWAL(ctx context.Context, store WALStore, key, path string) error {
	began := time.Now()
	obj, err := store.Stat(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrNotFound):
		put, err := store.PutFile(ctx, key, path)
		if err != nil {
			return err
		}
		// One line per file, as CloudNativePG's: how long each upload
		// takes is what says whether the archive keeps up.
		m.log.Info("archived", "key", key, "bytes", put.Size, "sha256", put.SHA256, "seconds", time.Since(began).Seconds())
		return nil
	case err != nil:
		return err
	}
	_, sum, err := fileDigest(path)
	if err != nil {
		return err
	}
	if obj.SHA256 == "" {
		rc, err := store.Get(ctx, key)
		if err != nil {
			return err
		}
		_, obj.SHA256, err = digestOf(rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	if obj.SHA256 != sum {
		return fmt.Errorf("%s already holds other bytes (sha256 %s, this file's %s): the archive is never overwritten; another database may be archiving to the same prefix", key, obj.SHA256, sum)
	}
	m.log.Info("already archived, identical", "key", key)
	return nil
}

// backfillArchive uploads the segments a primary received as a replica
// that the archive lacks: after a failover, what the old primary had not
// archived would otherwise be a gap no restore could cross. An object
// already at a key is left as it is (a received copy of a segment closed
// by a switch may differ from the archived one past the switch, where
// nothing reads).
func (m *Manager) backfillArchive(ctx context.Context, wa WALArchiver) error {
	paths, err := wa.ReceivedSegments()
	if err != nil {
		return err
	}
	a := &m.archive
	a.mu.Lock()
	dest, store := a.dest, a.store
	a.mu.Unlock()
	uploaded := 0
	for _, path := range paths {
		name := filepath.Base(path)
		key := WALKey(dest.Key, name)
		_, err := store.Stat(ctx, key)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, objectstore.ErrNotFound):
			return err
		}
		if _, err := store.PutFile(ctx, key, path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // recycled meanwhile: older than anything missing
			}
			return err
		}
		uploaded++
		a.mu.Lock()
		a.status.Archived++
		a.mu.Unlock()
	}
	if uploaded > 0 {
		m.log.Info("archived the segments received as a replica that the archive lacked", "files", uploaded)
	}
	return nil
}

// restoreFile fetches WAL file name of the archive a restore reads to path.
// A file the archive lacks is os.ErrNotExist: the engine asks for files
// that may not exist (the next timeline's history, the segment after the
// last). A segment fetched ahead is moved into place; each segment asked
// for starts the fetches of the ones after it (walPrefetch).
func (m *Manager) restoreFile(ctx context.Context, name, path string) error {
	if err := m.checkLocalFile(name, path); err != nil {
		return err
	}
	a := &m.archive
	a.mu.Lock()
	store, prefix, ahead := a.restoreFrom, a.restoreFromPrefix, a.prefetch
	a.mu.Unlock()
	if store == nil {
		return errors.New("no restore from an archive is running")
	}
	if ahead != nil {
		// The next ones download while this one does.
		ahead.after(name)
		if err := ahead.take(ctx, name, path); err == nil || ctx.Err() != nil {
			return err
		}
		// Not fetched ahead, or the fetch failed, or the archive lacked
		// the segment then (it may hold it now): fetched here.
	}
	return fetchWAL(ctx, store, WALKey(prefix, name), path)
}

// fetchWAL downloads the archived WAL file at key to path (through a
// temporary file beside it), checking its size and SHA-256. It is not
// synced: a restore that crashes starts again from its backup.
func fetchWAL(ctx context.Context, store WALStore, key, path string) error {
	obj, err := store.Stat(ctx, key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return os.ErrNotExist
	}
	if err != nil {
		return err
	}
	rc, err := store.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp := path + ".mydb-tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), rc)
	err = errors.Join(err, f.Close())
	if err == nil && n != obj.Size {
		err = fmt.Errorf("%s: read %d bytes of %d", key, n, obj.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); err == nil && obj.SHA256 != "" && sum != obj.SHA256 {
		err = fmt.Errorf("%s: checksum mismatch: read sha256 %s, archived %s", key, sum, obj.SHA256)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// checkLocalFile refuses what the local endpoints are asked that is not a
// WAL file's name, or a path outside the data volume: they read and write
// the engine's WAL files, nothing else, whoever in the pod calls them.
func (m *Manager) checkLocalFile(name, path string) error {
	if !walFileName.MatchString(name) {
		return fmt.Errorf("%q is not a WAL file's name", name)
	}
	return m.underDataRoot(path)
}

// underDataRoot refuses a path outside the data volume.
func (m *Manager) underDataRoot(path string) error {
	refused := fmt.Errorf("%q is not a file of the data volume %s", path, m.opts.DataRoot)
	if m.opts.DataRoot == "" || !filepath.IsAbs(path) {
		return refused
	}
	// Compared resolved: the engine's working directory, which the
	// command's relative path is made absolute from, is a physical path.
	root, err := filepath.EvalSymlinks(m.opts.DataRoot)
	if err != nil {
		return refused
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(filepath.Clean(path)))
	if err != nil || dir != root && !strings.HasPrefix(dir, root+string(filepath.Separator)) {
		return refused
	}
	return nil
}

// withRestoreArchive makes the restore command read from store at prefix
// while f runs.
func (m *Manager) withRestoreArchive(store WALStore, prefix string, f func() error) error {
	ahead, err := newWALPrefetch(store, prefix, WALPrefetchDir(m.opts.DataRoot), walPrefetchDepth)
	if err != nil {
		return err
	}
	defer ahead.close()
	a := &m.archive
	a.mu.Lock()
	a.restoreFrom, a.restoreFromPrefix, a.prefetch = store, prefix, ahead
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.restoreFrom, a.restoreFromPrefix, a.prefetch = nil, "", nil
		a.mu.Unlock()
	}()
	return f()
}

// servingPrimary tells whether this instance is the primary with its
// engine running, unfenced and not stopping: the one that archives.
func (m *Manager) servingPrimary() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.role == api.RolePrimary && m.st.child != nil && m.st.fenced == "" && !m.stopping
}

// archiveHeartbeats commits a heartbeat on the primary every archive
// timeout, while an archive is configured, so the recoverable window
// advances on an idle database too; and keeps Pending current.
func (m *Manager) archiveHeartbeats(ctx context.Context, wa WALArchiver) {
	every := m.opts.ArchiveTimeout
	if every <= 0 {
		every = DefaultArchiveTimeout
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	backfilled := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ready, err := wa.ReadyFiles(); err == nil {
			m.archive.mu.Lock()
			m.archive.status.Pending = len(ready)
			m.archive.mu.Unlock()
		}
		primary := m.servingPrimary()
		m.archive.mu.Lock()
		configured := m.archive.dest != nil
		m.archive.mu.Unlock()
		if !primary || !configured {
			backfilled = false
			continue
		}
		if !backfilled {
			backfilled = m.backfillArchive(ctx, wa) == nil
		}
		// The time is taken before the commit, so the commit's own
		// timestamp is later: a restore to any time before it stops at
		// (or before) this commit, which the archive holds once its file
		// is archived.
		at := time.Now().UTC()
		hctx, cancel := context.WithTimeout(ctx, every)
		file, err := wa.ArchiveHeartbeat(hctx)
		cancel()
		if err != nil {
			m.log.Info("archive heartbeat failed", "err", err)
			continue
		}
		m.archive.mu.Lock()
		m.archive.heartbeats = append(m.archive.heartbeats, heartbeat{at: at, file: file})
		if len(m.archive.heartbeats) > 1000 {
			m.archive.heartbeats = m.archive.heartbeats[len(m.archive.heartbeats)-1000:]
		}
		m.archive.mu.Unlock()
	}
}

// The local endpoints the engine's archive and restore commands call, on
// a unix socket in the run directory that only the engine's user reaches.
const (
	localPathArchive = "/wal/archive"
	localPathRestore = "/wal/restore"
)

// LocalSocket is the socket of the local endpoints in runDir.
func LocalSocket(runDir string) string { return filepath.Join(runDir, "mydb-instance.sock") }

func (m *Manager) serveLocal(socket string) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+localPathArchive, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if err := m.archiveFile(r.Context(), q.Get("path"), q.Get("name")); err != nil {
			m.log.Error("archiving a WAL file failed: the engine keeps it and retries", "file", q.Get("name"), "err", err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+localPathRestore, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		err := m.restoreFile(r.Context(), q.Get("name"), q.Get("path"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			http.Error(w, q.Get("name")+" is not in the archive", http.StatusNotFound)
			return
		case err != nil:
			m.log.Error("fetching a WAL file failed", "file", q.Get("name"), "err", err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	_ = os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("local socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("local server", "err", err)
		}
	}()
	return srv, nil
}

// CallLocal is what mydb-instance wal-archive and wal-restore do: ask the
// manager at socket to archive or fetch one file. It returns os.ErrNotExist
// for a file the archive lacks.
func CallLocal(ctx context.Context, socket string, restore bool, name, path string) error {
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	endpoint := localPathArchive
	if restore {
		endpoint = localPathRestore
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://manager"+endpoint+"?"+
		url.Values{"name": {name}, "path": {path}}.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("the instance manager: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusNotFound:
		return os.ErrNotExist
	}
	return fmt.Errorf("%s", strings.TrimSpace(string(msg)))
}

func fileDigest(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	return digestOf(f)
}

func digestOf(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return n, hex.EncodeToString(h.Sum(nil)), err
}
