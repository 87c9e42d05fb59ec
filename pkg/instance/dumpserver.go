package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// The dump server is what `mydb-instance dump-server` runs in the
// short-lived pod that mounts one backup's own claim: it keeps one dump, in
// one file, written once by the instance manager that takes the backup and
// read by the one that restores it.
//
//	GET  /healthz   -> 200 once it serves (no authentication)
//	PUT  /v1/dump   body: the backup stream -> 200 DumpInfo; 409 when the
//	                claim holds a dump already, 403 when mounted read-only
//	GET  /v1/dump   -> 200 the stream, with its size and X-Dump-SHA256
//	HEAD /v1/dump   -> the same headers
//
// The dump endpoints are authenticated like the instance manager's (HTTP
// basic, the replication user and the password of the mounted credentials
// Secret, the database's own): the instance that writes or reads presents
// its own.

// Files of a dump server's directory.
const (
	dumpFile     = "dump"
	dumpInfoFile = "dump.json"
	dumpPartial  = "dump.partial"
)

// DumpSHA256Header carries the dump's SHA-256 on GET and HEAD.
const DumpSHA256Header = "X-Dump-SHA256"

// DumpInfo is the size and SHA-256 of a dump, measured as it was written
// and kept next to it.
type DumpInfo struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// DumpServer serves the dump of the directory Dir.
type DumpServer struct {
	Dir string
	// ReadOnly refuses writes: a restore mounts the claim read-only.
	ReadOnly bool
	// Identity is the dump server's certificate; only the database's
	// instances are admitted.
	Identity *Identity

	// mu makes writes one at a time.
	mu sync.Mutex
}

// Handler is the server's HTTP API.
func (s *DumpServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("PUT /v1/dump", admit(s.put, pki.RoleInstance))
	// GET serves HEAD too.
	mux.HandleFunc("GET /v1/dump", admit(s.get, pki.RoleInstance))
	return mux
}

// put writes the stream to a scratch file and renames it into place only
// once the whole stream arrived and is on disk: an interrupted upload (the
// body ends early) leaves no dump.
func (s *DumpServer) put(w http.ResponseWriter, r *http.Request) {
	if s.ReadOnly {
		http.Error(w, "the claim is mounted read-only: a restore reads the dump, never writes it", http.StatusForbidden)
		return
	}
	if !s.mu.TryLock() {
		http.Error(w, "a dump is being written", http.StatusConflict)
		return
	}
	defer s.mu.Unlock()
	if _, err := os.Stat(filepath.Join(s.Dir, dumpFile)); err == nil {
		http.Error(w, "the claim holds a dump already: each backup is written once", http.StatusConflict)
		return
	}
	info, err := s.write(r.Body)
	if err != nil {
		_ = os.Remove(filepath.Join(s.Dir, dumpPartial))
		http.Error(w, "writing the dump: "+err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *DumpServer) write(body io.Reader) (DumpInfo, error) {
	partial := filepath.Join(s.Dir, dumpPartial)
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return DumpInfo{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), body)
	if err != nil {
		return DumpInfo{}, err
	}
	if err := f.Sync(); err != nil {
		return DumpInfo{}, err
	}
	if err := f.Close(); err != nil {
		return DumpInfo{}, err
	}
	info := DumpInfo{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	data, _ := json.Marshal(info)
	if err := writeFileSynced(filepath.Join(s.Dir, dumpInfoFile), data); err != nil {
		return DumpInfo{}, err
	}
	if err := os.Rename(partial, filepath.Join(s.Dir, dumpFile)); err != nil {
		return DumpInfo{}, err
	}
	return info, syncDir(s.Dir)
}

func (s *DumpServer) get(w http.ResponseWriter, r *http.Request) {
	info, err := s.info()
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	f, err := os.Open(filepath.Join(s.Dir, dumpFile))
	if err != nil {
		http.Error(w, "the claim holds no dump: "+err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set(DumpSHA256Header, info.SHA256)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, f)
}

// info is what was recorded of the dump when it was written.
func (s *DumpServer) info() (DumpInfo, error) {
	var info DumpInfo
	data, err := os.ReadFile(filepath.Join(s.Dir, dumpInfoFile))
	if err != nil {
		return info, fmt.Errorf("the claim holds no complete dump: %v", err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("the claim's %s is unreadable: %v", dumpInfoFile, err)
	}
	return info, nil
}

func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// dumpClient is the ObjectStore of a dump server, for the instance manager
// that backs up to it or restores from it. The server keeps one dump: the
// key is only named in messages.
type dumpClient struct {
	url    string
	client *http.Client
}

// OpenDump is the ObjectStore of the dump server at address (host:port),
// over mutual TLS as auth says.
func OpenDump(address string, auth api.Auth) ObjectStore {
	transport := &http.Transport{TLSClientConfig: auth.Credentials.TLSConfig(auth.Name), TLSHandshakeTimeout: 10 * time.Second}
	return &dumpClient{url: "https://" + address + "/v1/dump", client: &http.Client{Transport: transport}}
}

func (c *dumpClient) request(ctx context.Context, method string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("the dump server answered %s: %s", resp.Status, strings.TrimRight(string(msg), "\r\n"))
	}
	return resp, nil
}

// Put streams r to the server; the size and SHA-256 it wrote must be what
// was sent.
func (c *dumpClient) Put(ctx context.Context, key string, r io.Reader) (objectstore.Object, error) {
	h := sha256.New()
	counter := &countingReader{r: io.TeeReader(r, h)}
	// The body is the stream itself (no length: chunked), so a stream that
	// ends early ends the request without its last chunk, which the server
	// takes for an interrupted upload.
	resp, err := c.request(ctx, http.MethodPut, io.NopCloser(counter))
	if err != nil {
		if counter.err != nil {
			return objectstore.Object{}, counter.err
		}
		return objectstore.Object{}, err
	}
	defer resp.Body.Close()
	var info DumpInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return objectstore.Object{}, fmt.Errorf("reading the dump server's answer: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if info.Size != counter.n || info.SHA256 != sum {
		return objectstore.Object{}, fmt.Errorf("the dump server wrote %d bytes with sha256 %s, %d bytes with sha256 %s were sent", info.Size, info.SHA256, counter.n, sum)
	}
	return objectstore.Object{Key: key, Size: info.Size, SHA256: info.SHA256}, nil
}

// Get streams the dump.
func (c *dumpClient) Get(ctx context.Context, _ string) (io.ReadCloser, error) {
	resp, err := c.request(ctx, http.MethodGet, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Stat is the dump's recorded size and SHA-256.
func (c *dumpClient) Stat(ctx context.Context, key string) (objectstore.Object, error) {
	resp, err := c.request(ctx, http.MethodHead, nil)
	if err != nil {
		return objectstore.Object{}, err
	}
	resp.Body.Close()
	return objectstore.Object{Key: key, Size: resp.ContentLength, SHA256: resp.Header.Get(DumpSHA256Header)}, nil
}

// countingReader counts what it read and keeps the reader's error, which
// the HTTP client would otherwise report as its own.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, err
}
