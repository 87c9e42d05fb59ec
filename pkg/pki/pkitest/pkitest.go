// Package pkitest makes a database's certificates for tests that run
// instance managers without mydb's controller: the CA, the issuer the
// instances mount, and the credentials of the controller, of an instance,
// and of someone the database's CA never heard of.
package pkitest

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Database is one database's CA and issuer.
type Database struct {
	CA, Issuer *pki.KeyPair
}

// New makes a database's CA and issuer; it panics on failure (a broken
// crypto/rand), so test fixtures can call it anywhere.
func New() *Database {
	now := time.Now()
	ca, err := pki.NewCA("test CA", now)
	if err != nil {
		panic(err)
	}
	issuer, err := ca.NewIssuer("test instances", now)
	if err != nil {
		panic(err)
	}
	return &Database{CA: ca, Issuer: issuer}
}

// SecretData is what the instance Secret holds of the certificates: the
// keys the managers read.
func (d *Database) SecretData() map[string][]byte {
	key, err := d.Issuer.KeyPEM()
	if err != nil {
		panic(err)
	}
	return map[string][]byte{"ca.crt": d.CA.CertPEM(), "issuer.crt": d.Issuer.CertPEM(), "issuer.key": key}
}

// WriteSecrets writes SecretData into dir, one file per key, as the
// kubelet projects a Secret.
func (d *Database) WriteSecrets(dir string) error {
	for k, v := range d.SecretData() {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o400); err != nil {
			return err
		}
	}
	return nil
}

// Controller is the controller's credentials: a client certificate the
// root signed.
func (d *Database) Controller() *api.Credentials {
	return d.credentials("controller", d.CA, pki.ControllerName)
}

// Instance is the credentials of an instance named name: a certificate the
// issuer signed.
func (d *Database) Instance(name string) *api.Credentials {
	return d.credentials("instance/"+name, d.Issuer, name)
}

// Stranger is a client with a certificate of another CA, which calls
// itself the controller, and trusts this database's root (so the
// handshake fails on the manager's side, not its own).
func (d *Database) Stranger() *api.Credentials {
	other := New()
	c := other.credentials("stranger", other.CA, pki.ControllerName)
	c.Roots = pki.Pool(d.CA.Cert)
	return c
}

func (d *Database) credentials(id string, signer *pki.KeyPair, name string) *api.Credentials {
	leaf, err := signer.Issue(pki.Leaf{CommonName: name, Lifetime: time.Hour, Client: true, Server: signer == d.Issuer}, time.Now())
	if err != nil {
		panic(err)
	}
	cert := leaf.TLSCertificate()
	if signer == d.Issuer {
		cert = leaf.TLSCertificate(d.Issuer.Cert)
	}
	return &api.Credentials{ID: id + "/" + pki.Fingerprint(d.CA.Cert), Roots: pki.Pool(d.CA.Cert),
		Certificate: func() (*tls.Certificate, error) { return cert, nil }}
}

// ServerTLS serves as the instance name of the database: a certificate
// the issuer signed, client certificates of the database's root verified
// when given.
func (d *Database) ServerTLS(name string) *tls.Config {
	leaf, err := d.Issuer.Issue(pki.Leaf{CommonName: name, DNSNames: []string{name}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Lifetime: time.Hour, Server: true, Client: true}, time.Now())
	if err != nil {
		panic(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{*leaf.TLSCertificate(d.Issuer.Cert)},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pki.Pool(d.CA.Cert)}
}
