package instance

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
	"github.com/mydb-dev/mydb/pkg/pki/pkitest"
)

// testDatabase is the database of every manager and dump server these
// tests run: its CA and issuer.
var testDatabase = pkitest.New()

// testIdentity is the certificate of name (an instance or a dump server)
// of testDatabase, minted as mydb-instance does from the mounted Secret.
func testIdentity(t *testing.T, name string) *Identity {
	t.Helper()
	dir := t.TempDir()
	if err := testDatabase.WriteSecrets(dir); err != nil {
		t.Fatal(err)
	}
	id, err := NewIdentity(Secrets{Dir: dir}, InstanceLeaf(name, "db", "ns", "127.0.0.1"), nil, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// httpsClient calls the server named serverName as creds say; nil creds
// present no certificate (as the kubelet's probes do).
func httpsClient(creds *api.Credentials, serverName string) *http.Client {
	var config *tls.Config
	if creds == nil {
		config = &tls.Config{RootCAs: pki.Pool(testDatabase.CA.Cert), ServerName: serverName}
	} else {
		config = creds.TLSConfig(serverName)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: config}}
}

// TestInstanceLeafNamesThePodEverywherePeersReachIt: by its own name, its
// DNS names under the headless Service, the role Services, its pod IP and
// the loopback.
func TestInstanceLeafNamesThePodEverywherePeersReachIt(t *testing.T) {
	id := testIdentity(t, "shop-1")
	cert, _ := id.Certificate()
	for _, host := range []string{"shop-1", "shop-1.db-headless.ns.svc", "shop-1.db-headless.ns.svc.cluster.local", "db-rw.ns.svc",
		"db-ro", "db.ns.svc.cluster.local", "localhost", "127.0.0.1"} {
		if err := cert.Leaf.VerifyHostname(host); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	for _, host := range []string{"shop-0", "shop-0.db-headless.ns.svc", "db-rw.other.svc", "10.0.0.1"} {
		if err := cert.Leaf.VerifyHostname(host); err == nil {
			t.Errorf("the certificate of shop-1 names %s", host)
		}
	}
}

// TestRenewalReplacesTheEngineFilesAndTellsTheEngine: a renewal mints a
// new certificate for the same names, replaces the engine's files (the key
// readable by the engine's user alone) and calls what OnRenew set.
func TestRenewalReplacesTheEngineFilesAndTellsTheEngine(t *testing.T) {
	dir := t.TempDir()
	if err := testDatabase.WriteSecrets(dir); err != nil {
		t.Fatal(err)
	}
	files := EngineTLSIn(t.TempDir())
	id, err := NewIdentity(Secrets{Dir: dir}, InstanceLeaf("db-0", "db", "ns", "10.0.0.9"), &files, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(files.CertFile)
	renewed := 0
	id.OnRenew(func() { renewed++ })
	if err := id.renew(time.Now()); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(files.CertFile)
	if renewed != 1 || bytes.Equal(first, second) {
		t.Errorf("renewals told %d, certificate file changed %v", renewed, !bytes.Equal(first, second))
	}
	certs, err := pki.ParseCerts(second)
	if err != nil || len(certs) != 2 || certs[0].VerifyHostname("10.0.0.9") != nil {
		t.Errorf("the engine's certificate file: %d certificates, %v", len(certs), err)
	}
	// The chain CA file verifies the certificate file's first certificate
	// alone, as MySQL checks it at a reload.
	chain, err := os.ReadFile(files.ChainCAFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors, _ := pki.ParseCerts(chain)
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pki.Pool(anchors...), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil || len(anchors) != 2 {
		t.Errorf("the chain CA file (%d certificates) does not verify the leaf alone: %v", len(anchors), err)
	}
	if fi, err := os.Stat(files.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v %v, want mode 0600", fi.Mode(), err)
	}
	if at := pki.RenewAt(certs[0]); time.Until(at) < 59*24*time.Hour {
		t.Errorf("renewal due at %s, want two thirds into 90 days", at)
	}
}

// TestAServerCertificateOfTheUsersOwnIsTheEnginesWhileMounted: with a
// usable server certificate of the user's own in the Secret, the engine's
// files are it, its key and its CA, and the server-name file says what
// replicas verify; the manager's own HTTPS keeps the instance's
// certificate. Gone from the Secret (or unusable), the engine's files are
// the instance's again.
func TestAServerCertificateOfTheUsersOwnIsTheEnginesWhileMounted(t *testing.T) {
	dir := t.TempDir()
	if err := testDatabase.WriteSecrets(dir); err != nil {
		t.Fatal(err)
	}
	corporate, err := pki.NewCA("corporate CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	server, err := corporate.Issue(pki.Leaf{CommonName: "db.example.com", DNSNames: []string{"*.db.example.com", "db.example.com"},
		Lifetime: time.Hour, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := server.KeyPEM()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(SecretServerCert, server.CertPEM())
	write(SecretServerKey, key)
	write(SecretServerCA, corporate.CertPEM())
	files := EngineTLSIn(t.TempDir())
	id, err := NewIdentity(Secrets{Dir: dir}, InstanceLeaf("db-0", "db", "ns", "10.0.0.9"), &files, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	if read(files.CertFile) != string(server.CertPEM()) || read(files.KeyFile) != string(key) || read(files.CAFile) != string(corporate.CertPEM()) ||
		read(files.ServerNameFile) != "db.example.com" {
		t.Errorf("the engine's files are not the user's certificate, key, CA and name (name %q)", read(files.ServerNameFile))
	}
	if own, _ := id.Certificate(); own.Leaf.Subject.CommonName != "db-0" {
		t.Errorf("the manager serves %q, want the instance's own certificate", own.Leaf.Subject.CommonName)
	}
	// The instance's own files stay its own (MySQL's admin interface
	// serves them to replicas), with the database's CA beside.
	own, err := pki.ParseCerts([]byte(read(files.InstanceCertFile)))
	if err != nil || own[0].Subject.CommonName != "db-0" {
		t.Errorf("the instance's certificate file holds %v (%v), want the instance's", own, err)
	} else if _, err := tls.X509KeyPair([]byte(read(files.InstanceCertFile)), []byte(read(files.InstanceKeyFile))); err != nil {
		t.Errorf("the instance's key file does not go with its certificate: %v", err)
	}
	roots, err := pki.ParseCerts([]byte(read(files.DatabaseCAFile)))
	if err != nil || len(own) == 0 {
		t.Fatalf("the database's CA file: %v; the instance's certificate: %d", err, len(own))
	}
	chain, err := pki.ParseCerts([]byte(read(files.InstanceChainCAFile)))
	if err != nil {
		t.Fatalf("the instance's chain file: %v", err)
	}
	if _, err := own[0].Verify(x509.VerifyOptions{Roots: pki.Pool(roots...), Intermediates: pki.Pool(chain...), DNSName: "db-0"}); err != nil {
		t.Errorf("the instance's certificate does not verify against the database's CA file: %v", err)
	}
	// An expired one, or none, is not served.
	for _, name := range []string{SecretServerCert, SecretServerKey, SecretServerCA} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := id.renew(time.Now()); err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCerts([]byte(read(files.CertFile)))
	if err != nil || certs[0].Subject.CommonName != "db-0" {
		t.Errorf("without the user's certificate the engine's file holds %v (%v), want the instance's", certs, err)
	}
	if _, err := os.Stat(files.ServerNameFile); !os.IsNotExist(err) {
		t.Errorf("the server-name file is still there: %v", err)
	}
}
