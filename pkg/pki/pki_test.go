package pki

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

// TestPeerRoleFollowsTheChain: the controller is a leaf the root signed and
// says so; an instance is a leaf the issuer signed, whatever it calls
// itself; a CA the issuer made is not trusted at all; another database's
// leaves are nobody.
func TestPeerRoleFollowsTheChain(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := ca.NewIssuer("issuer", now)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewCA("other", now)
	issue := func(signer *KeyPair, name string, isCA bool) *KeyPair {
		t.Helper()
		if isCA {
			sub, err := signer.NewIssuer(name, now)
			if err != nil {
				t.Fatal(err)
			}
			return sub
		}
		leaf, err := signer.Issue(Leaf{CommonName: name, Lifetime: time.Hour, Client: true}, now)
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	subCA := issue(issuer, "sub", true)
	for name, tc := range map[string]struct {
		leaf          *KeyPair
		intermediates []*x509.Certificate
		want          Role
	}{
		"the controller":                            {issue(ca, ControllerName, false), nil, RoleController},
		"a root-signed leaf of another name":        {issue(ca, "db-0", false), nil, RoleNone},
		"an instance":                               {issue(issuer, "db-0", false), []*x509.Certificate{issuer.Cert}, RoleInstance},
		"an instance calling itself the controller": {issue(issuer, ControllerName, false), []*x509.Certificate{issuer.Cert}, RoleInstance},
		"a leaf of a CA the issuer made":            {issue(subCA, ControllerName, false), []*x509.Certificate{issuer.Cert, subCA.Cert}, RoleNone},
		"another database's controller":             {issue(other, ControllerName, false), nil, RoleNone},
	} {
		t.Run(name, func(t *testing.T) {
			chains, _ := tc.leaf.Cert.Verify(x509.VerifyOptions{Roots: Pool(ca.Cert), Intermediates: Pool(tc.intermediates...),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			if got, _ := PeerRole(&tls.ConnectionState{VerifiedChains: chains}); got != tc.want {
				t.Errorf("role %q, want %q (chains %d)", got, tc.want, len(chains))
			}
		})
	}
	if got, _ := PeerRole(&tls.ConnectionState{}); got != RoleNone {
		t.Errorf("without a certificate: %q", got)
	}
	if got, _ := PeerRole(nil); got != RoleNone {
		t.Errorf("over plain HTTP: %q", got)
	}
}

// TestKeyPairsRoundTrip: what is written to a Secret reads back, and a key
// that is not the certificate's is refused.
func TestKeyPairsRoundTrip(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("ca", now)
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeyPair(ca.CertPEM(), key)
	if err != nil || !back.Cert.Equal(ca.Cert) {
		t.Fatalf("read back %v, %v", back, err)
	}
	other, _ := NewCA("other", now)
	otherKey, _ := other.KeyPEM()
	if _, err := ParseKeyPair(ca.CertPEM(), otherKey); err == nil {
		t.Error("a key of another certificate was accepted")
	}
	leaf, _ := ca.Issue(Leaf{CommonName: "x", Lifetime: 90 * time.Hour, Server: true}, now)
	if at := RenewAt(leaf.Cert); at.Before(now.Add(59*time.Hour)) || at.After(now.Add(61*time.Hour)) {
		t.Errorf("renew at %s, want two thirds into its life", at)
	}
}
