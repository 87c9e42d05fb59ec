// Package objectstore keeps backups in an S3-compatible bucket: streamed in
// and out without staging the whole object on local disk.
package objectstore

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config says where the bucket is and how to sign in.
type Config struct {
	// Endpoint is the server's URL: https://host[:port] or http://host[:port].
	Endpoint string
	// Region is the bucket's region; empty means the server's default.
	Region string
	Bucket string
	// AccessKeyID and SecretAccessKey sign the requests.
	AccessKeyID     string
	SecretAccessKey string
	// CABundle holds PEM certificates to trust for an https endpoint besides
	// the system's.
	CABundle []byte
}

// Object is a stored object as Put measured it.
type Object struct {
	Key  string
	Size int64
	// SHA256 is the hex digest of the object's bytes.
	SHA256 string
}

// ErrNotFound is returned for an object (or bucket) that does not exist.
var ErrNotFound = errors.New("object not found")

// partSize bounds the memory one upload buffers: parts are sent as they
// fill, so a dump of any size streams through this much.
const partSize = 16 << 20

// Store is a bucket.
type Store struct {
	client *minio.Client
	bucket string
}

// New connects to cfg's bucket; it sends no request.
func New(cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("endpoint %q must be an http:// or https:// URL with a host and no path", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("a bucket must be named")
	}
	transport, err := minio.DefaultTransport(u.Scheme == "https")
	if err != nil {
		return nil, err
	}
	if len(cfg.CABundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(cfg.CABundle) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Secure:    u.Scheme == "https",
		Region:    cfg.Region,
		Transport: transport,
		// Path-style requests work with every S3-compatible server and
		// need no wildcard DNS.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, err
	}
	return &Store{client: client, bucket: cfg.Bucket}, nil
}

// Put streams r into key, replacing any object there, and returns the size
// and digest of what it sent. Nothing is visible at key unless the whole
// stream arrived: a failed or cancelled upload is aborted.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (Object, error) {
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(r, h)}
	_, err := s.client.PutObject(ctx, s.bucket, key, counted, -1, minio.PutObjectOptions{
		PartSize:    partSize,
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return Object{}, s.wrap(key, err)
	}
	return Object{Key: key, Size: counted.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// sha256Metadata is the user metadata PutFile records an object's digest
// in (x-amz-meta-sha256); minio-go hands it back under this name.
const sha256Metadata = "Sha256"

// PutFile uploads the file at path to key with its SHA-256 recorded in the
// object's metadata, which Stat then returns. The file is read twice (the
// digest first): it must not change meanwhile.
func (s *Store) PutFile(ctx context.Context, key, path string) (Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return Object{}, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return Object{}, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Object{}, err
	}
	counted := &countingReader{r: f}
	_, err = s.client.PutObject(ctx, s.bucket, key, counted, size, minio.PutObjectOptions{
		PartSize:     partSize,
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{sha256Metadata: sum},
	})
	if err != nil {
		return Object{}, s.wrap(key, err)
	}
	if counted.n != size {
		return Object{}, fmt.Errorf("%s changed while it was uploaded (%d bytes, then %d)", path, size, counted.n)
	}
	return Object{Key: key, Size: size, SHA256: sum}, nil
}

// Get opens key for reading. The reader fails with ErrNotFound on its first
// read when the object does not exist, so Get checks that first.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if _, err := s.Stat(ctx, key); err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap(key, err)
	}
	return obj, nil
}

// Stat tells the size of key, and its SHA-256 when PutFile recorded it
// (empty otherwise: the server does not keep one).
func (s *Store) Stat(ctx context.Context, key string) (Object, error) {
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return Object{}, s.wrap(key, err)
	}
	return Object{Key: key, Size: info.Size, SHA256: info.UserMetadata[sha256Metadata]}, nil
}

// Delete removes key; an object that is already gone is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err != nil {
		if werr := s.wrap(key, err); !errors.Is(werr, ErrNotFound) || isNoSuchBucket(err) {
			return werr
		}
	}
	return nil
}

// List returns the keys under prefix, in the server's order.
func (s *Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, s.wrap(prefix, info.Err)
		}
		out = append(out, Object{Key: info.Key, Size: info.Size})
	}
	return out, nil
}

// EnsureBucket makes the bucket when it does not exist (for tests and for
// servers where the backup's credentials may create it).
func (s *Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.wrap("", err)
	}
	if ok {
		return nil
	}
	return s.wrap("", s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}))
}

func (s *Store) wrap(key string, err error) error {
	if err == nil {
		return nil
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == minio.NoSuchKey || resp.Code == minio.NoSuchBucket || resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("s3://%s/%s: %w (%s)", s.bucket, key, ErrNotFound, strings.TrimSpace(resp.Message))
	case resp.Code != "":
		return fmt.Errorf("s3://%s/%s: %s: %s", s.bucket, key, resp.Code, resp.Message)
	}
	return fmt.Errorf("s3://%s/%s: %w", s.bucket, key, err)
}

func isNoSuchBucket(err error) bool { return minio.ToErrorResponse(err).Code == minio.NoSuchBucket }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
