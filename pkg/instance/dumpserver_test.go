package instance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func startDumpServer(t *testing.T, dir string, readOnly bool) string {
	addr, _ := startCountingDumpServer(t, dir, readOnly)
	return addr
}

// startCountingDumpServer also says how many PUTs its handler has
// finished: a client whose body fails returns before the server has read
// (and cleaned up) what it sent.
func startCountingDumpServer(t *testing.T, dir string, readOnly bool) (string, func() int32) {
	t.Helper()
	var puts atomic.Int32
	h := (&DumpServer{Dir: dir, ReadOnly: readOnly}).Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			defer puts.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	srv.TLS = testIdentity(t, "dump-0").ServerConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), puts.Load
}

// asInstance is how an instance of the database reaches the dump server.
var asInstance = api.Auth{Credentials: testDatabase.Instance("db-0"), Name: "dump-0"}

func TestDumpServerKeepsOneDumpByteForByte(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := make([]byte, 5<<20+123)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)

	store := OpenDump(startDumpServer(t, dir, false), asInstance)
	obj, err := store.Put(ctx, dumpFile, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if obj.Size != int64(len(data)) || obj.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("put answered %d bytes, sha256 %s; want %d, %x", obj.Size, obj.SHA256, len(data), sum)
	}
	if _, err := store.Put(ctx, dumpFile, strings.NewReader("again")); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("a second put: %v, want 409", err)
	}

	// A restore's server mounts the claim read-only: it serves the same
	// bytes and refuses writes.
	reader := OpenDump(startDumpServer(t, dir, true), asInstance)
	stat, err := reader.Stat(ctx, dumpFile)
	if err != nil || stat.Size != obj.Size || stat.SHA256 != obj.SHA256 {
		t.Errorf("stat: %+v, %v; want %+v", stat, err, obj)
	}
	rc, err := reader.Get(ctx, dumpFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("get: %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	if _, err := reader.Put(ctx, dumpFile, strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a put to a read-only server: %v, want 403", err)
	}
	// The controller's certificate is the database's, but only instances
	// write and read dumps; another CA's does not get through the handshake.
	if _, err := OpenDump(startDumpServer(t, dir, true), api.Auth{Credentials: testDatabase.Controller(), Name: "dump-0"}).Get(ctx, dumpFile); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a get as the controller: %v, want 403", err)
	}
	if _, err := OpenDump(startDumpServer(t, dir, true), api.Auth{Credentials: testDatabase.Stranger(), Name: "dump-0"}).Get(ctx, dumpFile); err == nil {
		t.Error("a get with another CA's certificate succeeded")
	}
	// A server that is not the dump pod named is refused by the client.
	if _, err := OpenDump(startDumpServer(t, dir, true), api.Auth{Credentials: testDatabase.Instance("db-0"), Name: "dump-1"}).Get(ctx, dumpFile); err == nil || !strings.Contains(err.Error(), "dump-1") {
		t.Errorf("a get from a server that is not dump-1: %v, want a certificate error", err)
	}
}

// failingReader gives n bytes, then fails as a backup tool that dies does.
type failingReader struct{ n int }

func (f *failingReader) Read(b []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("the backup tool died")
	}
	k := min(len(b), f.n)
	f.n -= k
	return k, nil
}

func TestDumpServerKeepsNothingOfAnInterruptedUpload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	addr, puts := startCountingDumpServer(t, dir, false)
	store := OpenDump(addr, asInstance)
	if _, err := store.Put(ctx, dumpFile, &failingReader{n: 3 << 20}); err == nil || !strings.Contains(err.Error(), "the backup tool died") {
		t.Fatalf("an interrupted upload: %v, want the tool's error", err)
	}
	// The server notices the body's end without its last chunk: once its
	// handler is done with the request, nothing of it is left. (The
	// client returns first: looking before the handler has even opened
	// its scratch file finds nothing, and proves nothing.)
	for i := 0; puts() == 0 && i < 250; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if puts() == 0 {
		t.Fatal("the server's handler did not finish the interrupted upload within 5 s")
	}
	leftovers := func() []string {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	if left := leftovers(); len(left) != 0 {
		t.Errorf("an interrupted upload left %v in the claim", left)
	}
	if _, err := store.Stat(ctx, dumpFile); err == nil {
		t.Error("the server answers for a dump it never completed")
	}
	// The claim still takes the backup, the next time. The handler of the
	// interrupted one may still be answering (the scratch file is removed
	// before its lock is released): until then a put is refused as
	// concurrent, which a retry gets past.
	var err error
	for range 100 {
		if _, err = store.Put(ctx, dumpFile, strings.NewReader("complete")); err == nil || !strings.Contains(err.Error(), "a dump is being written") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("a put after an interrupted one: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, dumpFile)); string(data) != "complete" {
		t.Errorf("the dump holds %q", data)
	}
}
