package objectstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/test/s3server"
)

// pseudoRandom is n reproducible bytes that do not compress, as a stream
// of unknown length (no Seek, no Len), the way a dump arrives.
func pseudoRandom(seed uint64, n int64) io.Reader {
	r := rand.New(rand.NewPCG(seed, seed))
	return io.LimitReader(readerFunc(func(p []byte) (int, error) {
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return len(p), nil
	}), n)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func digest(r io.Reader) (int64, string) {
	h := sha256.New()
	n, _ := io.Copy(h, r)
	return n, hex.EncodeToString(h.Sum(nil))
}

// TestObjectStore runs against one real weed S3 gateway
// (hack/build-tools.sh weed).
func TestObjectStore(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *s3server.Server)
	}{
		{"an object larger than a part streams in and out", testStreamsAnObjectLargerThanAPart},
		{"a failed upload leaves no object and no parts", testAFailedUploadLeavesNoObjectAndNoParts},
		{"wrong credentials are refused", testWrongCredentialsAreRefused},
		{"https with a CA bundle", testHTTPSWithACABundle},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, srv) })
	}
}

func testStreamsAnObjectLargerThanAPart(t *testing.T, srv *s3server.Server) {
	st := srv.Store(t)
	ctx := context.Background()
	const size = 40<<20 + 12345 // two full parts and a bit
	wantSize, wantSum := digest(pseudoRandom(1, size))

	obj, err := st.Put(ctx, "stream/large.tar", pseudoRandom(1, size))
	if err != nil {
		t.Fatal(err)
	}
	if obj.Size != wantSize || obj.SHA256 != wantSum {
		t.Fatalf("Put measured %d bytes %s, want %d %s", obj.Size, obj.SHA256, wantSize, wantSum)
	}
	stat, err := st.Stat(ctx, "stream/large.tar")
	if err != nil || stat.Size != wantSize {
		t.Fatalf("Stat: %+v, %v", stat, err)
	}
	r, err := st.Get(ctx, "stream/large.tar")
	if err != nil {
		t.Fatal(err)
	}
	gotSize, gotSum := digest(r)
	r.Close()
	if gotSize != wantSize || gotSum != wantSum {
		t.Fatalf("Get read %d bytes %s, want %d %s", gotSize, gotSum, wantSize, wantSum)
	}
	if _, err := st.Put(ctx, "stream/small", strings.NewReader("small")); err != nil {
		t.Fatal(err)
	}
	list, err := st.List(ctx, "stream/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key != "stream/large.tar" || list[0].Size != wantSize || list[1].Key != "stream/small" {
		t.Errorf("List: %+v", list)
	}
	if err := st.Delete(ctx, "stream/large.tar"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, "stream/large.tar"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
	}
	if _, err := st.Get(ctx, "stream/large.tar"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	// Deleting what is gone is fine: retention may run twice.
	if err := st.Delete(ctx, "stream/large.tar"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if err := st.Delete(ctx, "never/was"); err != nil {
		t.Errorf("Delete of a key that never was: %v", err)
	}
}

// failingReader yields n bytes and then err: a dump whose tool died.
func failingReader(n int64, err error) io.Reader {
	return io.MultiReader(pseudoRandom(2, n), readerFunc(func([]byte) (int, error) { return 0, err }))
}

func testAFailedUploadLeavesNoObjectAndNoParts(t *testing.T, srv *s3server.Server) {
	st := srv.Store(t)
	ctx := context.Background()
	boom := errors.New("pg_basebackup exited with status 1")

	// Past the first part, so parts were already uploaded, and before it.
	for _, n := range []int64{20 << 20, 1 << 20} {
		if _, err := st.Put(ctx, "db/failed", failingReader(n, boom)); !errors.Is(err, boom) && (err == nil || !strings.Contains(err.Error(), boom.Error())) {
			t.Fatalf("Put of a stream failing after %d bytes: %v, want the stream's error", n, err)
		}
		if _, err := st.Stat(ctx, "db/failed"); !errors.Is(err, objectstore.ErrNotFound) {
			t.Fatalf("after a failed upload of %d bytes, Stat: %v, want ErrNotFound", n, err)
		}
	}
	// A cancelled upload (the backup was abandoned) too.
	cctx, cancel := context.WithCancel(ctx)
	cancelled := false
	slow := io.MultiReader(pseudoRandom(3, 20<<20), readerFunc(func(p []byte) (int, error) {
		if cancelled {
			return 0, io.EOF
		}
		cancelled = true
		cancel()
		time.Sleep(100 * time.Millisecond)
		return copy(p, "x"), nil
	}), pseudoRandom(4, 20<<20))
	if _, err := st.Put(cctx, "db/cancelled", slow); err == nil {
		t.Fatal("a cancelled Put succeeded")
	}
	if _, err := st.Stat(ctx, "db/cancelled"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("after a cancelled upload, Stat: %v, want ErrNotFound", err)
	}
	// No multipart upload is left to fill the bucket.
	raw := rawClient(t, srv)
	for u := range raw.ListIncompleteUploads(ctx, srv.Bucket, "db/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("incomplete upload left: %s (%s)", u.Key, u.UploadID)
	}
}

func rawClient(t *testing.T, srv *s3server.Server) *minio.Client {
	t.Helper()
	u, _ := url.Parse(srv.Endpoint)
	c, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKeyID, srv.SecretAccessKey, ""), BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testWrongCredentialsAreRefused(t *testing.T, srv *s3server.Server) {
	ctx := context.Background()
	if _, err := srv.Store(t).Put(ctx, "db/kept", strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*objectstore.Config){
		"wrong secret key": func(c *objectstore.Config) { c.SecretAccessKey += "x" },
		"unknown key":      func(c *objectstore.Config) { c.AccessKeyID = "nobody" },
		"no credentials":   func(c *objectstore.Config) { c.AccessKeyID, c.SecretAccessKey = "", "" },
	} {
		cfg := srv.Config()
		mutate(&cfg)
		st, err := objectstore.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, "db/intruder", strings.NewReader("x")); err == nil {
			t.Errorf("%s: Put succeeded", name)
		}
		if _, err := st.Stat(ctx, "db/kept"); err == nil || errors.Is(err, objectstore.ErrNotFound) {
			t.Errorf("%s: Stat of an existing object: %v, want a refusal (not NotFound)", name, err)
		}
		if _, err := st.Get(ctx, "db/kept"); err == nil {
			t.Errorf("%s: Get succeeded", name)
		}
	}
	if _, err := srv.Store(t).Stat(ctx, "db/intruder"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("an object written with wrong credentials: %v", err)
	}
}

func testHTTPSWithACABundle(t *testing.T, srv *s3server.Server) {
	ctx := context.Background()
	st, err := objectstore.New(srv.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Put(ctx, "db/tls", bytes.NewReader([]byte("over TLS")))
	if err != nil {
		t.Fatal(err)
	}
	if obj.Size != 8 {
		t.Errorf("size %d", obj.Size)
	}
	// Without the bundle the server's certificate is not trusted.
	cfg := srv.TLSConfig()
	cfg.CABundle = nil
	untrusting, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.Stat(ctx, "db/tls"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA bundle: %v, want a certificate error", err)
	}
	cfg.CABundle = []byte("not PEM")
	if _, err := objectstore.New(cfg); err == nil {
		t.Error("a CA bundle without a certificate was accepted")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []objectstore.Config{
		{Endpoint: "127.0.0.1:9000", Bucket: "b"},
		{Endpoint: "ftp://127.0.0.1", Bucket: "b"},
		{Endpoint: "http://127.0.0.1/path", Bucket: "b"},
		{Endpoint: "http://127.0.0.1:9000"},
	} {
		if _, err := objectstore.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
