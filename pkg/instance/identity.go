package instance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Keys of the instance Secret that hold the database's CA and the issuer
// the instances mint their certificates with.
const (
	SecretCA         = "ca.crt"
	SecretIssuerCert = "issuer.crt"
	SecretIssuerKey  = "issuer.key"
	// A server certificate of the user's own (spec.tls), which the engine
	// serves in place of the instance's: its chain, key and CA.
	SecretServerCert = "server.crt"
	SecretServerKey  = "server.key"
	SecretServerCA   = "server-ca.crt"
)

// EngineTLS is where the manager writes the engine's certificate files,
// renewed with its own (the engines read them at start and at a reload).
type EngineTLS struct {
	// CertFile holds the instance's certificate followed by the issuer's.
	CertFile string
	// KeyFile is its private key, readable by the engine's user only.
	KeyFile string
	// CAFile is the database's root CA: what replicas verify the primary
	// against.
	CAFile string
	// ChainCAFile holds the issuer and the root: MySQL verifies its own
	// certificate against its ssl_ca with the first certificate of CertFile
	// alone, and refuses ALTER INSTANCE RELOAD TLS when that fails.
	ChainCAFile string
	// ServerNameFile holds, while the engine serves a certificate of the
	// user's own, the name replicas verify it by (pki.ServerName); there
	// is none while it serves the instance's, verified by its address.
	ServerNameFile string
	// The instance's own certificate, key and chain (issuer and root),
	// and the database's root CA, whatever the engine serves clients:
	// MySQL's admin interface serves them to replicas, which verify the
	// primary by its address against the database's CA even while
	// clients get a certificate of the user's own.
	InstanceCertFile, InstanceKeyFile, InstanceChainCAFile, DatabaseCAFile string
}

// EngineTLSIn is the layout of EngineTLS in the run directory.
func EngineTLSIn(runDir string) EngineTLS {
	dir := filepath.Join(runDir, "tls")
	return EngineTLS{CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"), CAFile: filepath.Join(dir, "ca.crt"),
		ChainCAFile: filepath.Join(dir, "chain-ca.crt"), ServerNameFile: filepath.Join(dir, "server-name"),
		InstanceCertFile: filepath.Join(dir, "instance.crt"), InstanceKeyFile: filepath.Join(dir, "instance.key"),
		InstanceChainCAFile: filepath.Join(dir, "instance-chain-ca.crt"), DatabaseCAFile: filepath.Join(dir, "database-ca.crt")}
}

// Identity is an instance's (or a dump server's) certificate: minted at
// start from the issuer in the mounted Secret, for the names peers reach
// it by, and renewed at two thirds of its life. It serves the manager's
// HTTPS, is the client certificate of its calls to other managers, and,
// written to EngineTLS, the engine's.
type Identity struct {
	leaf    pki.Leaf
	secrets Secrets
	files   *EngineTLS
	log     *slog.Logger

	mu sync.Mutex
	// roots are the database's roots the instance trusts (two during a
	// rotation of its CA); mounted is the Secret's CA bundle and issuer
	// the current certificate was minted with.
	roots   []*x509.Certificate
	mounted string
	issuer  *x509.Certificate
	current *tls.Certificate
	// renewed is called after each renewal (the engine reloads its files).
	renewed func()
}

// InstanceLeaf is what an instance's certificate names: its pod, by its
// own name and its DNS names under the headless Service; the Services
// that route to the database's instances; its pod IP; and the loopback,
// where kubectl port-forward connects.
func InstanceLeaf(name, db, namespace string, ips ...string) pki.Leaf {
	var dns []string
	add := func(host string) {
		dns = append(dns, host)
		if namespace != "" {
			dns = append(dns, host+"."+namespace, host+"."+namespace+".svc", host+"."+namespace+".svc.cluster.local")
		}
	}
	dns = append(dns, name)
	if db != "" {
		add(name + "." + names.HeadlessService(db))
		for _, svc := range []string{names.ClientService(db), names.ReadWriteService(db), names.ReadOnlyService(db), names.AnyInstanceService(db)} {
			add(svc)
		}
	}
	dns = append(dns, "localhost")
	leaf := pki.Leaf{CommonName: name, DNSNames: dns, Lifetime: pki.InstanceLifetime, Server: true, Client: true,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	for _, ip := range ips {
		if parsed := net.ParseIP(ip); parsed != nil && !parsed.IsUnspecified() && !slices.ContainsFunc(leaf.IPs, parsed.Equal) {
			leaf.IPs = append(leaf.IPs, parsed)
		}
	}
	return leaf
}

// NewIdentity mints the first certificate; files, when set, receive it for
// the engine.
func NewIdentity(secrets Secrets, leaf pki.Leaf, files *EngineTLS, log *slog.Logger) (*Identity, error) {
	id := &Identity{leaf: leaf, secrets: secrets, files: files, log: log}
	if err := id.renew(time.Now()); err != nil {
		return nil, err
	}
	return id, nil
}

// OnRenew sets what runs after each renewal.
func (id *Identity) OnRenew(f func()) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.renewed = f
}

// mountedNow is the CA bundle and the issuer's certificate as mounted now.
func (id *Identity) mountedNow() (string, error) {
	rootPEM, err := id.secrets.Get(SecretCA)
	if err != nil {
		return "", err
	}
	certPEM, err := id.secrets.Get(SecretIssuerCert)
	if err != nil {
		return "", err
	}
	server, _ := id.secrets.Optional(SecretServerCert)
	return rootPEM + "\x00" + certPEM + "\x00" + server, nil
}

// renew mints a certificate with the issuer as mounted now: at two thirds
// of the current one's life, and when the kubelet updated the Secret (a
// rotation of the database's CA).
func (id *Identity) renew(now time.Time) error {
	rootPEM, err := id.secrets.Get(SecretCA)
	if err != nil {
		return err
	}
	roots, err := pki.ParseCerts([]byte(rootPEM))
	if err != nil {
		return fmt.Errorf("%s: %w", SecretCA, err)
	}
	certPEM, err := id.secrets.Get(SecretIssuerCert)
	if err != nil {
		return err
	}
	keyPEM, err := id.secrets.Get(SecretIssuerKey)
	if err != nil {
		return err
	}
	issuer, err := pki.ParseKeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return fmt.Errorf("the issuer: %w", err)
	}
	if _, err := issuer.Cert.Verify(x509.VerifyOptions{Roots: pki.Pool(roots...), CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("the issuer does not chain to %s: %w", SecretCA, err)
	}
	leaf, err := issuer.Issue(id.leaf, now)
	if err != nil {
		return err
	}
	cert := leaf.TLSCertificate(issuer.Cert)
	server, _ := id.secrets.Optional(SecretServerCert)
	if id.files != nil {
		if err := id.write(leaf, issuer.Cert, roots, now); err != nil {
			return err
		}
	}
	id.mu.Lock()
	id.roots, id.issuer, id.current, id.mounted = roots, issuer.Cert, cert, rootPEM+"\x00"+certPEM+"\x00"+server
	renewed := id.renewed
	id.mu.Unlock()
	if renewed != nil {
		renewed()
	}
	return nil
}

// write replaces the engine's files, each by a rename, so an engine that
// reads them meanwhile sees the old set or the new: the instance's
// certificate, or a server certificate of the user's own when the Secret
// holds a usable one.
func (id *Identity) write(leaf *pki.KeyPair, issuer *x509.Certificate, roots []*x509.Certificate, now time.Time) error {
	keyPEM, err := leaf.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(id.files.KeyFile), 0o700); err != nil {
		return err
	}
	certPEM, caPEM := pki.EncodeCerts(leaf.Cert, issuer), pki.EncodeCerts(roots...)
	chainPEM, serverName := pki.EncodeCerts(append([]*x509.Certificate{issuer}, roots...)...), ""
	instanceKeyPEM, instanceCertPEM, instanceChainPEM, databaseCAPEM := keyPEM, certPEM, chainPEM, caPEM
	if server, _ := id.secrets.Optional(SecretServerCert); server != "" {
		key, _ := id.secrets.Optional(SecretServerKey)
		ca, _ := id.secrets.Optional(SecretServerCA)
		name, err := pki.CheckServerCertificate([]byte(server), []byte(key), []byte(ca), now)
		if err != nil {
			// The controller copies only a usable one: this is a Secret
			// being rewritten, or a certificate that expired since.
			id.log.Error("not serving the server certificate of spec.tls", "err", err)
		} else {
			// Secrets.Get took the PEM's last newline.
			keyPEM, certPEM, caPEM, serverName = []byte(key+"\n"), []byte(server+"\n"), []byte(ca+"\n"), name
			chainPEM = caPEM
		}
	}
	if id.files.ServerNameFile != "" && serverName == "" {
		if err := os.Remove(id.files.ServerNameFile); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{id.files.KeyFile, keyPEM, 0o600},
		{id.files.CertFile, certPEM, 0o644},
		{id.files.CAFile, caPEM, 0o644},
		{id.files.ChainCAFile, chainPEM, 0o644},
		{id.files.ServerNameFile, []byte(serverName), 0o644},
		{id.files.InstanceKeyFile, instanceKeyPEM, 0o600},
		{id.files.InstanceCertFile, instanceCertPEM, 0o644},
		{id.files.InstanceChainCAFile, instanceChainPEM, 0o644},
		{id.files.DatabaseCAFile, databaseCAPEM, 0o644},
	} {
		if f.path == id.files.ServerNameFile && serverName == "" {
			continue
		}
		if f.path == "" {
			continue
		}
		tmp := f.path + ".new"
		if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(tmp, f.mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return err
		}
	}
	return nil
}

// SecretCheckInterval is how often Run looks for a changed issuer or CA
// bundle in the mounted Secret.
var SecretCheckInterval = 5 * time.Second

// Run renews the certificate at two thirds of its life, or as soon as the
// mounted Secret holds another issuer or CA bundle, until ctx ends; a
// failed renewal is tried again every SecretCheckInterval while the old
// one holds.
func (id *Identity) Run(ctx context.Context) {
	var lastError time.Time
	for {
		id.mu.Lock()
		at, mounted := pki.RenewAt(id.current.Leaf), id.mounted
		id.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Until(at), SecretCheckInterval)):
		}
		if now, err := id.mountedNow(); time.Now().Before(at) && (err != nil || now == mounted) {
			// Nothing due; a Secret being rewritten is read again next time.
			continue
		}
		if err := id.renew(time.Now()); err != nil {
			// A Secret caught while it was being rewritten reads well a
			// moment later; one that stays broken is logged once a minute.
			if time.Since(lastError) >= time.Minute {
				id.log.Error("renewing the instance's certificate", "err", err)
				lastError = time.Now()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(SecretCheckInterval):
			}
		} else {
			lastError = time.Time{}
			id.log.Info("renewed the instance's certificate")
		}
	}
}

// Certificate is the current certificate.
func (id *Identity) Certificate() (*tls.Certificate, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.current, nil
}

// Roots is a pool of the database's roots.
func (id *Identity) Roots() *x509.CertPool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return pki.Pool(id.roots...)
}

// Report is what the instance's status says of its certificates.
func (id *Identity) Report() *api.Certificates {
	id.mu.Lock()
	defer id.mu.Unlock()
	r := &api.Certificates{Issuer: pki.Fingerprint(id.issuer), NotAfter: id.current.Leaf.NotAfter}
	for _, root := range id.roots {
		r.Roots = append(r.Roots, pki.Fingerprint(root))
	}
	return r
}

// rootsID names the roots for Credentials.ID.
func (id *Identity) rootsID() string {
	var ids []string
	for _, root := range id.roots {
		ids = append(ids, pki.Fingerprint(root))
	}
	return strings.Join(ids, "+")
}

// ServerConfig serves HTTPS with the current certificate and verifies the
// client certificates presented against the database's root. A client
// without one is let through the handshake (the kubelet's probes have
// none): each handler says whom it admits (PeerRole).
func (id *Identity) ServerConfig() *tls.Config {
	return id.serverConfig(tls.VerifyClientCertIfGiven)
}

// PeerServerConfig serves TLS with the current certificate to clients
// that present a certificate of the database's root: the handshake fails
// for any other.
func (id *Identity) PeerServerConfig() *tls.Config {
	return id.serverConfig(tls.RequireAndVerifyClientCert)
}

func (id *Identity) serverConfig(auth tls.ClientAuthType) *tls.Config {
	certificate := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return id.Certificate() }
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: certificate,
		ClientAuth:     auth,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			// The roots as mounted now, should they change.
			return &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: auth, ClientCAs: id.Roots(), GetCertificate: certificate}, nil
		},
	}
}

// Credentials are the instance's, for its calls to other managers of its
// database.
func (id *Identity) Credentials() *api.Credentials {
	id.mu.Lock()
	defer id.mu.Unlock()
	return &api.Credentials{ID: "instance/" + id.leaf.CommonName + "/" + id.rootsID(), Roots: pki.Pool(id.roots...), Certificate: id.Certificate}
}

// admit wraps h so only peers of the given roles reach it; anyone else is
// answered 401 (no certificate) or 403 (a certificate of another role).
func admit(h http.HandlerFunc, roles ...pki.Role) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		role, _ := pki.PeerRole(r.TLS)
		if role == pki.RoleNone {
			http.Error(w, "a client certificate of the database's CA is required", http.StatusUnauthorized)
			return
		}
		if !slices.Contains(roles, role) {
			http.Error(w, fmt.Sprintf("the %s may not call this endpoint", role), http.StatusForbidden)
			return
		}
		h(w, r)
	}
}
