// Package s3server starts a real S3-compatible server for tests: SeaweedFS's
// weed (built by hack/build-tools.sh weed) with its S3 gateway on loopback,
// free ports, its data in a temporary directory, and an identity whose keys
// every request must be signed with.
package s3server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/test/repo"
)

// Host is the loopback address the server listens on unless
// Options.Host says otherwise.
const Host = "127.0.0.1"

// Server is a running weed S3 gateway with one bucket.
type Server struct {
	// Endpoint is http://127.0.0.1:<port>; HTTPSEndpoint serves the same
	// over TLS, with a certificate for 127.0.0.1 that CABundle signed.
	Endpoint        string
	HTTPSEndpoint   string
	Region          string
	Bucket          string
	AccessKeyID     string
	SecretAccessKey string
	CABundle        []byte
	// Dir holds the server's data and log.
	Dir string
}

// Options change how Start runs the server.
type Options struct {
	// Bucket is the bucket made at start ("backups" when empty).
	Bucket string
	// Host is the address to listen on (Host when empty): the real node's
	// pods reach the machine at the node's address, not at loopback.
	Host string
}

// Binary is $MYDB_WEED_BIN or the weed hack/build-tools.sh caches in
// _output/bin.
func Binary() (string, error) {
	if bin := os.Getenv("MYDB_WEED_BIN"); bin != "" {
		return bin, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "_output", "bin", "weed")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no weed (SeaweedFS) at %s: run hack/build-tools.sh weed, or set MYDB_WEED_BIN: %w", bin, err)
	}
	return bin, nil
}

// Start runs a weed server for the test and stops it in t.Cleanup. It
// fails the test (it never skips) when weed is missing or does not come up.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mydb-s3-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Region: "us-east-1", Bucket: o.Bucket, Dir: dir,
		AccessKeyID: "mydb" + randomHex(8), SecretAccessKey: randomHex(20),
	}
	if s.Bucket == "" {
		s.Bucket = "backups"
	}
	identities, _ := json.Marshal(map[string]any{"identities": []map[string]any{{
		"name":        "mydb-tests",
		"credentials": []map[string]string{{"accessKey": s.AccessKeyID, "secretKey": s.SecretAccessKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	config := filepath.Join(dir, "s3.json")
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(config, identities, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	host := o.Host
	if host == "" {
		host = Host
	}
	ports := freePorts(t, host, 11)
	// weed mini is master, volume server, filer and S3 gateway in one
	// process, made for a single-node cluster (it skips the filer's wait
	// for peers that weed server has).
	args := []string{"mini", "-dir=" + data, "-ip=" + host, "-ip.bind=" + host,
		"-master.port=" + ports[0], "-master.port.grpc=" + ports[1],
		"-volume.port=" + ports[2], "-volume.port.grpc=" + ports[3],
		"-filer.port=" + ports[4], "-filer.port.grpc=" + ports[5],
		"-s3.port=" + ports[6], "-s3.port.grpc=" + ports[7], "-s3.config=" + config,
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-admin.ui=false", "-admin.port=" + ports[9], "-admin.port.grpc=" + ports[10], "-admin.port.legacy=0",
		"-webdav=false",
		// Small volumes: a test stores tens of megabytes. A fixed count,
		// not one derived from the disk's free space, which on a nearly
		// full disk leaves no volume to write to.
		"-master.volumeSizeLimitMB=64", "-volume.max=32",
	}
	cert, key, ca := selfSigned(t, dir, host)
	args = append(args, "-s3.port.https="+ports[8], "-s3.cert.file="+cert, "-s3.key.file="+key)
	s.Endpoint = "http://" + net.JoinHostPort(host, ports[6])
	s.HTTPSEndpoint, s.CABundle = "https://"+net.JoinHostPort(host, ports[8]), ca
	logPath := filepath.Join(dir, "weed.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Should the test binary die without its cleanups, weed dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		// The data is thrown away: no clean shutdown is needed.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		// weed also listens on unix sockets in /tmp named by its ports.
		for _, p := range ports {
			matches, _ := filepath.Glob("/tmp/seaweedfs-*-" + p + ".sock")
			for _, m := range matches {
				_ = os.Remove(m)
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("=== last lines of %s ===\n%s", logPath, strings.Join(lines, "\n"))
		}
		_ = os.RemoveAll(dir)
	})
	if err := s.waitBucket(exited, time.Minute); err != nil {
		t.Fatalf("weed S3 at %s did not come up (log %s)%s: %v", s.Endpoint, logPath, lowDisk(dir), err)
	}
	return s
}

// lowDisk says when the filesystem under dir is nearly full: weed's volume
// server then registers no capacity ("no volume server capacity registered
// yet") and every write is refused, which reads like a weed defect.
func lowDisk(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	free, total := st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize)
	if total == 0 || free*100/total >= 3 {
		return ""
	}
	return fmt.Sprintf(" (its filesystem has only %d MiB of %d MiB free: weed stores nothing below about 1.5%% free)", free>>20, total>>20)
}

// Config is the objectstore configuration of the server's bucket over
// http.
func (s *Server) Config() objectstore.Config {
	return objectstore.Config{
		Endpoint: s.Endpoint, Region: s.Region, Bucket: s.Bucket,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey,
	}
}

// TLSConfig is Config over https, trusting CABundle.
func (s *Server) TLSConfig() objectstore.Config {
	c := s.Config()
	c.Endpoint, c.CABundle = s.HTTPSEndpoint, s.CABundle
	return c
}

// Store is the server's bucket.
func (s *Server) Store(t testing.TB) *objectstore.Store {
	t.Helper()
	st, err := objectstore.New(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitBucket makes the bucket once the gateway, the filer and a volume
// answer, and proves a write goes through.
func (s *Server) waitBucket(exited <-chan struct{}, timeout time.Duration) error {
	st, err := objectstore.New(s.Config())
	if err != nil {
		return err
	}
	// Each step is retried on its own with a short timeout: the first
	// requests hang while the gateway finds the filer and the master grows
	// the first volume, and a retry then goes through at once. On a loaded
	// machine (images built beside the tests) growing a volume may take
	// longer than a second, so each retry waits twice as long, up to 10s.
	steps := []struct {
		name string
		do   func(context.Context) error
	}{
		{"create the bucket", st.EnsureBucket},
		{"put a probe object", func(ctx context.Context) error {
			_, err := st.Put(ctx, ".mydb-s3server-probe", strings.NewReader("ok"))
			return err
		}},
		{"delete the probe object", func(ctx context.Context) error { return st.Delete(ctx, ".mydb-s3server-probe") }},
	}
	start := time.Now()
	deadline := start.Add(timeout)
	for _, step := range steps {
		attempt := time.Second
		for tries := 1; ; tries++ {
			ctx, cancel := context.WithTimeout(context.Background(), attempt)
			err = step.do(ctx)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-exited:
				return fmt.Errorf("weed exited: %s: %w", step.name, err)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %d tries in %s, the last one: %w", step.name, tries, time.Since(start).Round(time.Millisecond), err)
			}
			attempt = min(2*attempt, 10*time.Second)
		}
	}
	return nil
}

// givenPorts are the ports freePorts handed out in this process, by host:
// weed binds them a moment after they were closed, and tests running in
// parallel (make e2e) start servers at the same time; the kernel may offer
// a port just closed again, so none is ever handed out twice.
var givenPorts = struct {
	sync.Mutex
	ports map[string]bool
}{ports: map[string]bool{}}

func freePorts(t testing.TB, host string, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for len(out) < n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		// Held open until all are picked, so no two are the same.
		lns = append(lns, ln)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		if key := net.JoinHostPort(host, port); !givenPorts.ports[key] {
			givenPorts.ports[key] = true
			out = append(out, port)
		}
	}
	return out
}

// selfSigned writes a CA and a certificate for host it signed; it returns
// the certificate's and key's paths and the CA's PEM.
func selfSigned(t testing.TB, dir, host string) (certPath, keyPath string, caPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mydb test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(host)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
