// Package access is how people reach a database with their Kubernetes
// identity alone: short-lived database users for the
// mydatabases/credentials subresource (made by the primary's instance
// manager, called over mutual TLS with the controller's certificate from
// pkg/databaseca) and the mydatabases/connect tunnel to an instance's
// engine port.
// It reads Secrets and Pods from the controllers' informers, which run on
// every replica of mydb-apiserver, leader or not.
package access

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// Issued is a credential and where to use it.
type Issued struct {
	Credential api.Credential
	// Instance is the primary that made the user.
	Instance string
	// Database is the application's database.
	Database string
	// CACertificate verifies the engine's certificate, for ServerName when
	// it is one of the user's own (empty: the database's CA issued it).
	CACertificate []byte
	ServerName    string
}

// ErrUnavailable wraps every reason a credential cannot be made now (no
// ready primary, a manager that does not answer): asking again later may
// succeed.
var ErrUnavailable = errors.New("no credential can be made now")

// Issuer makes credentials on a database's primary.
type Issuer struct {
	Authority *databaseca.Authority
	Secrets   corelisters.SecretLister
	Pods      corelisters.PodLister
	Managers  *api.Client
}

// Issue has the primary of db make the user req names.
func (i *Issuer) Issue(ctx context.Context, db *example.MyDatabase, req api.CredentialRequest) (*Issued, error) {
	primary, ip, err := i.readyPrimary(db)
	if err != nil {
		return nil, err
	}
	app, err := i.Secrets.Secrets(db.Namespace).Get(names.Secret(db.Name))
	if err != nil {
		return nil, unavailable("reading the credentials Secret %q: %v", names.Secret(db.Name), err)
	}
	ca, err := i.Secrets.Secrets(db.Namespace).Get(names.CASecret(db.Name))
	if err != nil {
		return nil, unavailable("reading the CA Secret %q: %v", names.CASecret(db.Name), err)
	}
	state, err := databaseca.ParseState(ca)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	creds, err := i.Authority.Credentials(db.Namespace, db.Name)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	// The manager's certificate must name the primary: a pod at that
	// address that is not it (a recycled IP) is refused by the handshake.
	cred, err := i.Managers.CreateCredential(ctx, ip, api.Auth{Credentials: creds, Name: primary}, req)
	if err != nil {
		return nil, unavailable("the primary's manager: %v", err)
	}
	issued := &Issued{Credential: *cred, Instance: primary, Database: string(app.Data["database"]), CACertificate: state.Bundle()}
	// A server certificate of the user's own, as the engines serve it.
	if certificates, err := i.Secrets.Secrets(db.Namespace).Get(names.CertificatesSecret(db.Name)); err == nil && len(certificates.Data[databaseca.KeyServerCert]) > 0 {
		if certs, err := pki.ParseCerts(certificates.Data[databaseca.KeyServerCert]); err == nil {
			issued.CACertificate, issued.ServerName = certificates.Data[databaseca.KeyServerCA], pki.ServerName(certs[0])
		}
	}
	return issued, nil
}

// InstanceAddress is where an instance of db serves clients (its pod's
// IP and the engine's port), for the mydatabases/connect tunnel, and the
// instance's name. instance is example.ConnectToPrimary (or empty) for the
// ready primary, example.ConnectToReplica for a ready replica (picked at
// random), or an instance's name
// for that instance while it is ready. The engine's TLS, verified by the
// client against the database's CA, proves who answers: the tunnel
// carries bytes.
func (i *Issuer) InstanceAddress(db *example.MyDatabase, instance string) (string, string, error) {
	eng, ok := engine.Lookup(string(db.Spec.Engine))
	if !ok {
		return "", "", fmt.Errorf("unknown engine %q", db.Spec.Engine)
	}
	var name, ip string
	var err error
	switch instance {
	case "", example.ConnectToPrimary:
		name, ip, err = i.readyPrimary(db)
	case example.ConnectToReplica:
		name, err = readyReplica(db)
		if err == nil {
			ip, err = i.podIP(db, name)
		}
	default:
		name, err = readyInstance(db, instance)
		if err == nil {
			ip, err = i.podIP(db, name)
		}
	}
	if err != nil {
		return "", "", err
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(eng.Port))), name, nil
}

// readyReplica is one of the ready replicas, picked at random: tunnels
// spread over them as the read-only Service's connections do.
func readyReplica(db *example.MyDatabase) (string, error) {
	var ready []string
	for _, in := range db.Status.Instances {
		if in.Ready && in.Role == example.InstanceRoleReplica && !in.Fenced {
			ready = append(ready, in.Name)
		}
	}
	if len(ready) == 0 {
		return "", unavailable("the database has no ready replica")
	}
	return ready[rand.IntN(len(ready))], nil
}

// readyInstance is name when it is one of db's instances and ready.
func readyInstance(db *example.MyDatabase, name string) (string, error) {
	for _, in := range db.Status.Instances {
		if in.Name != name {
			continue
		}
		if !in.Ready || in.Fenced {
			return "", unavailable("the instance %s is not ready", name)
		}
		return name, nil
	}
	return "", unavailable("the database has no instance %s", name)
}

func (i *Issuer) podIP(db *example.MyDatabase, name string) (string, error) {
	pod, err := i.Pods.Pods(db.Namespace).Get(name)
	if err != nil {
		return "", unavailable("reading the pod %s: %v", name, err)
	}
	if pod.Status.PodIP == "" {
		return "", unavailable("the pod %s has no address", name)
	}
	return pod.Status.PodIP, nil
}

func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnavailable, fmt.Sprintf(format, args...))
}

// readyPrimary is the name and pod IP of db's primary, when the status
// says it is ready and no switchover is under way.
func (i *Issuer) readyPrimary(db *example.MyDatabase) (string, string, error) {
	primary := db.Status.CurrentPrimary
	if primary == "" {
		return "", "", unavailable("the database has no primary yet")
	}
	if t := db.Status.TargetPrimary; t != "" && t != primary {
		return "", "", unavailable("the primary moves from %s to %s", primary, t)
	}
	ready := false
	for _, in := range db.Status.Instances {
		if in.Name == primary {
			ready = in.Ready && in.Role == example.InstanceRolePrimary
		}
	}
	if !ready {
		return "", "", unavailable("the primary %s is not ready", primary)
	}
	ip, err := i.podIP(db, primary)
	if err != nil {
		return "", "", err
	}
	return primary, ip, nil
}

// TunnelProtocol is the HTTP upgrade of POST mydatabases/<name>/connect:
// after 101 Switching Protocols the connection carries the engine's own
// protocol (TLS included) both ways, unchanged, to the primary.
const TunnelProtocol = "mydb-tunnel"

// TunnelInstanceHeader names, in the 101 answer, the instance the tunnel
// leads to.
const TunnelInstanceHeader = "Mydb-Tunnel-Instance"

// TunnelSubresource is the subresource that tunnels; mydb-apiserver
// counts its requests as long-running (no request timeout).
const TunnelSubresource = "connect"
