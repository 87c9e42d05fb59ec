package databaseca

import (
	"crypto/x509"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mydb-dev/mydb/pkg/carotation"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Keys of the CA Secret during a rotation (pkg/carotation): the root being
// introduced, and the one that signed before it.
const (
	KeyNextCert     = "next-ca.crt"
	KeyNextKey      = "next-ca.key"
	KeyPreviousCert = "previous-ca.crt"
)

// State is what the CA Secret holds: the root that signs, and the other
// root trusted with it while a rotation is under way.
type State struct {
	// Active signs the issuer and the controller's certificates.
	Active *pki.KeyPair
	// Next is the root being introduced (Introducing).
	Next *pki.KeyPair
	// Previous is the root that signed before Active (Switched).
	Previous *x509.Certificate
	Phase    carotation.Phase
	// Since is when the phase began; Handled the rotate-CA request the
	// last rotation began for.
	Since   time.Time
	Handled string
}

// ParseState reads the CA Secret.
func ParseState(secret *corev1.Secret) (*State, error) {
	active, err := ParseCA(secret)
	if err != nil {
		return nil, err
	}
	s := &State{Active: active, Handled: secret.Annotations[names.CARotatedForAnnotation]}
	if v := secret.Annotations[names.CARotationPhaseSinceAnnotation]; v != "" {
		if s.Since, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, fmt.Errorf("the CA Secret %q: annotation %s: %w", secret.Name, names.CARotationPhaseSinceAnnotation, err)
		}
	}
	switch {
	case len(secret.Data[KeyNextCert]) > 0:
		if s.Next, err = pki.ParseKeyPair(secret.Data[KeyNextCert], secret.Data[KeyNextKey]); err != nil {
			return nil, fmt.Errorf("the CA Secret %q: the next root: %w", secret.Name, err)
		}
		s.Phase = carotation.Introducing
	case len(secret.Data[KeyPreviousCert]) > 0:
		certs, err := pki.ParseCerts(secret.Data[KeyPreviousCert])
		if err != nil {
			return nil, fmt.Errorf("the CA Secret %q: the previous root: %w", secret.Name, err)
		}
		s.Previous, s.Phase = certs[0], carotation.Switched
	}
	return s, nil
}

// Trusted are the roots every peer of the database trusts now: the active
// one first, then the one being introduced or retired.
func (s *State) Trusted() []*x509.Certificate {
	roots := []*x509.Certificate{s.Active.Cert}
	switch {
	case s.Next != nil:
		roots = append(roots, s.Next.Cert)
	case s.Previous != nil:
		roots = append(roots, s.Previous)
	}
	return roots
}

// Bundle is Trusted in PEM: the ca.crt of the instance Secret and of the
// credentials Secret applications mount.
func (s *State) Bundle() []byte { return pki.EncodeCerts(s.Trusted()...) }

// Fingerprints are Trusted's fingerprints.
func (s *State) Fingerprints() []string {
	var out []string
	for _, c := range s.Trusted() {
		out = append(out, pki.Fingerprint(c))
	}
	return out
}

// Advance is the CA Secret's data and annotations after action, taken at
// now for the rotate-CA request requested (Begin only).
func (s *State) Advance(secret *corev1.Secret, action carotation.Action, namespace, db, requested string, now time.Time) (map[string][]byte, map[string]string, error) {
	data := maps.Clone(secret.Data)
	annotations := maps.Clone(secret.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[names.CARotationPhaseSinceAnnotation] = now.UTC().Format(time.RFC3339)
	switch action {
	case carotation.Begin:
		if s.Phase != carotation.Idle {
			return nil, nil, fmt.Errorf("a rotation is under way (%s)", s.Phase)
		}
		next, err := pki.NewCA(fmt.Sprintf("mydb %s/%s CA %s", namespace, db, now.UTC().Format("20060102T150405Z")), now)
		if err != nil {
			return nil, nil, err
		}
		key, err := next.KeyPEM()
		if err != nil {
			return nil, nil, err
		}
		data[KeyNextCert], data[KeyNextKey] = next.CertPEM(), key
		if requested != "" {
			annotations[names.CARotatedForAnnotation] = requested
		}
	case carotation.Switch:
		if s.Phase != carotation.Introducing {
			return nil, nil, fmt.Errorf("no new root to switch to (%q)", s.Phase)
		}
		data[KeyPreviousCert] = data[KeyCert]
		data[KeyCert], data[KeyKey] = data[KeyNextCert], data[KeyNextKey]
		delete(data, KeyNextCert)
		delete(data, KeyNextKey)
	case carotation.Finish:
		if s.Phase != carotation.Switched {
			return nil, nil, fmt.Errorf("no previous root to retire (%q)", s.Phase)
		}
		delete(data, KeyPreviousCert)
	default:
		return nil, nil, fmt.Errorf("unknown action %q", action)
	}
	return data, annotations, nil
}

// Keys of the certificates Secret that carry a server certificate of the
// user's own (spec.tls.serverCertificateSecret), which the engines serve in
// place of the instances' own (pkg/instance reads them under the same
// names).
const (
	KeyServerCert = "server.crt"
	KeyServerKey  = "server.key"
	KeyServerCA   = "server-ca.crt"
)
