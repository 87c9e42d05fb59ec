// Package credentials makes short-lived database users for the
// mydatabases/credentials subresource: it finds the database's primary,
// calls its instance manager over mutual TLS with the controller's
// certificate (pkg/databaseca), and answers what a client needs to connect.
// It reads Secrets and Pods from the controllers' informers, which run on
// every replica of mydb-apiserver, leader or not.
package access

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
)

// Issued is a credential and where to use it.
type Issued struct {
	Credential api.Credential
	// Instance is the primary that made the user.
	Instance string
	// Database is the application's database.
	Database string
	// CACertificate verifies the engine's certificate.
	CACertificate []byte
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
	return &Issued{Credential: *cred, Instance: primary, Database: string(app.Data["database"]), CACertificate: ca.Data[databaseca.KeyCert]}, nil
}

// PrimaryAddress is where the ready primary of db serves clients (its
// pod's IP and the engine's port), for the mydatabases/connect tunnel, and
// the primary's name. The engine's TLS, verified by the client against
// the database's CA, proves it is the primary's: the tunnel carries bytes.
func (i *Issuer) PrimaryAddress(db *example.MyDatabase) (string, string, error) {
	primary, ip, err := i.readyPrimary(db)
	if err != nil {
		return "", "", err
	}
	eng, ok := engine.Lookup(string(db.Spec.Engine))
	if !ok {
		return "", "", fmt.Errorf("unknown engine %q", db.Spec.Engine)
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(eng.Port))), primary, nil
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
	pod, err := i.Pods.Pods(db.Namespace).Get(primary)
	if err != nil {
		return "", "", unavailable("reading the primary's pod: %v", err)
	}
	if pod.Status.PodIP == "" {
		return "", "", unavailable("the primary's pod %s has no address", primary)
	}
	return primary, pod.Status.PodIP, nil
}

// TunnelProtocol is the HTTP upgrade of POST mydatabases/<name>/connect:
// after 101 Switching Protocols the connection carries the engine's own
// protocol (TLS included) both ways, unchanged, to the primary.
const TunnelProtocol = "mydb-tunnel"

// TunnelSubresource is the subresource that tunnels; mydb-apiserver
// counts its requests as long-running (no request timeout).
const TunnelSubresource = "connect"
