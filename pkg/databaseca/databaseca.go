// Package databaseca is mydb-apiserver's side of a database's certificates
// (pkg/pki): the root CA the controller makes once and keeps in the
// database's CA Secret, the issuer it gives the instances, and the client
// certificate the controllers and the credentials subresource present to
// the instance managers, renewed as it nears its end.
package databaseca

import (
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Keys of the CA Secret.
const (
	KeyCert = "ca.crt"
	KeyKey  = "ca.key"
)

// Keys of the instance Secret that carry certificates (pkg/instance reads
// them under the same names).
const (
	KeyIssuerCert = "issuer.crt"
	KeyIssuerKey  = "issuer.key"
)

// NewCAData is a new root CA for database db of namespace, as the CA
// Secret's data.
func NewCAData(namespace, db string, now time.Time) (map[string][]byte, error) {
	ca, err := pki.NewCA(fmt.Sprintf("mydb %s/%s CA", namespace, db), now)
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyCert: ca.CertPEM(), KeyKey: key}, nil
}

// ParseCA reads the CA Secret.
func ParseCA(secret *corev1.Secret) (*pki.KeyPair, error) {
	ca, err := pki.ParseKeyPair(secret.Data[KeyCert], secret.Data[KeyKey])
	if err != nil {
		return nil, fmt.Errorf("the CA Secret %q: %w", secret.Name, err)
	}
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("the CA Secret %q holds no CA certificate", secret.Name)
	}
	return ca, nil
}

// NewIssuerData is a new issuer under ca for the instances of db, as data
// of the instance Secret (with the root's certificate).
func NewIssuerData(ca *pki.KeyPair, namespace, db string, now time.Time) (map[string][]byte, error) {
	issuer, err := ca.NewIssuer(fmt.Sprintf("mydb %s/%s instances", namespace, db), now)
	if err != nil {
		return nil, err
	}
	key, err := issuer.KeyPEM()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyCert: ca.CertPEM(), KeyIssuerCert: issuer.CertPEM(), KeyIssuerKey: key}, nil
}

// Authority gives the controllers the credentials they call a database's
// managers with: the database's roots and a client certificate the root
// that signs signed for the controller (pki.ControllerName), made on first
// use and again at two thirds of its life, or when the CA Secret changes.
type Authority struct {
	Secrets corelisters.SecretLister
	Clock   clock.PassiveClock

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	secretVersion string
	credentials   *api.Credentials
	cert          *tls.Certificate
	renewAt       time.Time
	ca            *pki.KeyPair
}

// Credentials are those for the managers of database db in namespace.
func (a *Authority) Credentials(namespace, db string) (*api.Credentials, error) {
	secret, err := a.Secrets.Secrets(namespace).Get(names.CASecret(db))
	if apierrors.IsNotFound(err) {
		// Being made again, mutable, from its copy (an earlier mydb's
		// immutable one): the copy is the same.
		if copied, copyErr := a.Secrets.Secrets(namespace).Get(names.CASecretCopy(db)); copyErr == nil {
			secret, err = copied, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the database's CA Secret %q: %w", names.CASecret(db), err)
	}
	now := a.now()
	key := namespace + "/" + db
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entries[key]
	if e == nil || e.secretVersion != string(secret.UID)+"/"+secret.ResourceVersion {
		state, err := ParseState(secret)
		if err != nil {
			return nil, err
		}
		// The client certificate is of the root that signs; the managers'
		// are verified against every root trusted now (during a rotation,
		// some hold a certificate of the other).
		e = &entry{secretVersion: string(secret.UID) + "/" + secret.ResourceVersion, ca: state.Active}
		e.credentials = &api.Credentials{ID: "controller/" + key + "/" + strings.Join(state.Fingerprints(), "+"), Roots: pki.Pool(state.Trusted()...),
			Certificate: func() (*tls.Certificate, error) { return a.certificate(e) }}
		if a.entries == nil {
			a.entries = map[string]*entry{}
		}
		a.entries[key] = e
	}
	if e.cert == nil || !now.Before(e.renewAt) {
		if err := a.issue(e, now); err != nil {
			return nil, err
		}
	}
	return e.credentials, nil
}

// certificate is e's client certificate, renewed when due (a long-lived
// connection's next handshake asks again).
func (a *Authority) certificate(e *entry) (*tls.Certificate, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.cert == nil || !now.Before(e.renewAt) {
		if err := a.issue(e, now); err != nil {
			return nil, err
		}
	}
	return e.cert, nil
}

func (a *Authority) issue(e *entry, now time.Time) error {
	leaf, err := e.ca.Issue(pki.Leaf{CommonName: pki.ControllerName, Lifetime: pki.ControllerLifetime, Client: true}, now)
	if err != nil {
		return err
	}
	e.cert, e.renewAt = leaf.TLSCertificate(), pki.RenewAt(leaf.Cert)
	return nil
}

// Forget drops what is kept for database db (deleted).
func (a *Authority) Forget(namespace, db string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.entries, namespace+"/"+db)
}

func (a *Authority) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}
