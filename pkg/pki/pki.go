// Package pki is the certificates of a database: a root CA that only
// mydb's controller holds the key of, an issuer (an intermediate CA) that
// the database's instances hold and mint their own certificates with, and
// the leaves. Who a peer is follows from its chain: a leaf the root signed
// is the controller's, one the issuer signed an instance's (or a dump
// server's), so an instance can never act as the controller toward another.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Lifetimes. The CA and the issuer live long: replacing them means every
// instance must get the new issuer, which a running pod reads only from its
// mounted Secret. Leaves live short and are renewed by whoever holds them
// at two thirds of their life (RenewAt).
const (
	CALifetime         = 10 * 365 * 24 * time.Hour
	InstanceLifetime   = 90 * 24 * time.Hour
	ControllerLifetime = 24 * time.Hour
	// backdate covers clocks that run behind the issuer's.
	backdate = 5 * time.Minute
)

// ControllerName is the common name of the controller's client certificates.
const ControllerName = "mydb-controller"

// Role is who a verified peer is.
type Role string

const (
	RoleNone       Role = ""
	RoleController Role = "controller"
	RoleInstance   Role = "instance"
)

// KeyPair is a certificate with its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a database's root CA. It may sign the issuer (one level of
// CA below it) and the controller's leaves.
func NewCA(commonName string, now time.Time) (*KeyPair, error) {
	return newKeyPair(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"mydb"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	})
}

// NewIssuer makes the instances' issuer under ca: it signs leaves only
// (MaxPathLen 0), for servers and clients.
func (ca *KeyPair) NewIssuer(commonName string, now time.Time) (*KeyPair, error) {
	return newKeyPair(ca, &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"mydb"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              minTime(now.Add(CALifetime), ca.Cert.NotAfter),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	})
}

// Leaf describes a certificate to issue.
type Leaf struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	Lifetime   time.Duration
	// Server and Client are the uses it may be put to.
	Server, Client bool
}

// Issue signs leaf with a fresh key.
func (issuer *KeyPair) Issue(leaf Leaf, now time.Time) (*KeyPair, error) {
	if !leaf.Server && !leaf.Client {
		return nil, errors.New("a certificate must be for a server, a client or both")
	}
	var usages []x509.ExtKeyUsage
	if leaf.Server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	return newKeyPair(issuer, &x509.Certificate{
		Subject:               pkix.Name{CommonName: leaf.CommonName},
		DNSNames:              leaf.DNSNames,
		IPAddresses:           leaf.IPs,
		NotBefore:             now.Add(-backdate),
		NotAfter:              minTime(now.Add(leaf.Lifetime), issuer.Cert.NotAfter),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usages,
		BasicConstraintsValid: true,
	})
}

// RenewAt is when a certificate should be replaced: at two thirds of its
// life.
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}

func newKeyPair(issuer *KeyPair, tmpl *x509.Certificate) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	parent, signer := tmpl, crypto.Signer(key)
	if issuer != nil {
		parent, signer = issuer.Cert, issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// CertPEM is the certificate in PEM.
func (kp *KeyPair) CertPEM() []byte { return EncodeCerts(kp.Cert) }

// KeyPEM is the private key in PEM (PKCS #8).
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(kp.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// TLSCertificate is the pair for crypto/tls, with chain after the leaf
// (the issuer, for an instance's leaf, so peers that trust only the root
// can verify it).
func (kp *KeyPair) TLSCertificate(chain ...*x509.Certificate) *tls.Certificate {
	c := &tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
	for _, ca := range chain {
		c.Certificate = append(c.Certificate, ca.Raw)
	}
	return c
}

// EncodeCerts is certs in PEM, one after the other.
func EncodeCerts(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// ParseKeyPair reads a certificate and its key from PEM, and checks they
// belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unknown private key type %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the private key cannot sign")
	}
	pub, ok := certs[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(signer.Public()) {
		return nil, errors.New("the private key is not the certificate's")
	}
	return &KeyPair{Cert: certs[0], Key: signer}, nil
}

// ParseCerts reads one or more PEM certificates.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// Pool is a pool of certs.
func Pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// Fingerprint is the SHA-256 of a certificate, in hex: it names a CA in
// caches and logs.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:8])
}

// PeerRole is who the peer of a connection is, from the chain crypto/tls
// verified against the database's root: a leaf the root signed directly
// is the controller's (and must say so), one the issuer signed is an
// instance's. Anything else, or no verified chain, is nobody.
func PeerRole(state *tls.ConnectionState) (Role, string) {
	if state == nil {
		return RoleNone, ""
	}
	for _, chain := range state.VerifiedChains {
		leaf := chain[0]
		switch {
		case len(chain) == 2 && leaf.Subject.CommonName == ControllerName:
			return RoleController, leaf.Subject.CommonName
		case len(chain) == 3:
			return RoleInstance, leaf.Subject.CommonName
		}
	}
	return RoleNone, ""
}

// CheckServerCertificate tells whether a server certificate of a user's
// own can be served: its key is its own, it chains (through the
// certificates after it in certPEM) to a certificate of caPEM for server
// use now, and it has a DNS name. It returns ServerName of it.
func CheckServerCertificate(certPEM, keyPEM, caPEM []byte, now time.Time) (string, error) {
	kp, err := ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return "", fmt.Errorf("tls.crt and tls.key: %w", err)
	}
	chain, _ := ParseCerts(certPEM)
	roots, err := ParseCerts(caPEM)
	if err != nil {
		return "", fmt.Errorf("ca.crt (the CA that signed the certificate, which replicas verify their primary against): %w", err)
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: Pool(roots...), Intermediates: Pool(chain[1:]...), CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "", fmt.Errorf("the certificate does not verify against ca.crt for a server now: %w", err)
	}
	name := ServerName(kp.Cert)
	if name == "" {
		return "", errors.New("the certificate names no DNS name: replicas verify their primary by one")
	}
	return name, nil
}

// ServerName is the name a server certificate of a user's own is
// verified for by replicas: its first DNS name that is no wildcard, else
// a name the first wildcard matches ("" when it has none).
func ServerName(cert *x509.Certificate) string {
	for _, name := range cert.DNSNames {
		if !strings.HasPrefix(name, "*.") {
			return name
		}
	}
	for _, name := range cert.DNSNames {
		return "replication" + strings.TrimPrefix(name, "*")
	}
	return ""
}
