package api_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
	"github.com/mydb-dev/mydb/pkg/pki/pkitest"
)

// manager answers like the instance manager db-0 of database: its status,
// the operation it knows, 404, 409 or 422, and 401 to a client without a
// certificate of the database's.
func manager(t *testing.T, database *pkitest.Database) (*Client, string) {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if role, _ := pki.PeerRole(r.TLS); role != pki.RoleController {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET "+PathStatus, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(Status{Name: "db-0", Role: RolePrimary, Position: &Position{Timeline: 1, LSN: "0/3000148"}})
	})
	mux.HandleFunc("POST "+PathBackups, auth(func(w http.ResponseWriter, r *http.Request) {
		var req BackupRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Destination.S3 == nil {
			http.Error(w, "destination.s3: Required value", http.StatusUnprocessableEntity)
			return
		}
		if req.ID == "busy" {
			http.Error(w, "a backup runs", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(Operation{ID: req.ID, Phase: OperationRunning})
	}))
	mux.HandleFunc("GET "+PathBackup, auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "known" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(Operation{ID: "known", Phase: OperationSucceeded, Size: 42})
	}))
	mux.HandleFunc("GET "+PathRestore, auth(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(Operation{ID: "r1", Phase: OperationFailed, Message: "sha256 mismatch"})
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = serverTLS(t, database, "db-0")
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return &Client{Port: p}, host
}

// serverTLS serves as the instance name of database, verifying the
// client certificates given.
func serverTLS(t *testing.T, database *pkitest.Database, name string) *tls.Config {
	t.Helper()
	leaf, err := database.Issuer.Issue(pki.Leaf{CommonName: name, DNSNames: []string{name}, Lifetime: time.Hour, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{*leaf.TLSCertificate(database.Issuer.Cert)},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pki.Pool(database.CA.Cert)}
}

func TestClientStatus(t *testing.T) {
	database := pkitest.New()
	c, host := manager(t, database)
	auth := Auth{Credentials: database.Controller(), Name: "db-0"}
	s, err := c.Status(context.Background(), host, auth)
	if err != nil || s.Name != "db-0" || s.Role != RolePrimary || s.Position == nil || s.Position.LSN != "0/3000148" {
		t.Fatalf("Status: %+v %v", s, err)
	}
	// Whatever else answers at the address is not a status.
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = serverTLS(t, database, "db-0")
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	other := &Client{Port: p}
	if _, err := other.Status(context.Background(), host, auth); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Status of something else: %v, want the 404", err)
	}
}

// TestClientVerifiesWhoAnswers: a manager whose certificate names another
// instance (a recycled pod IP), or is of another database's CA, is refused
// before the request is sent; so is a call without credentials.
func TestClientVerifiesWhoAnswers(t *testing.T) {
	database := pkitest.New()
	c, host := manager(t, database)
	ctx := context.Background()
	if _, err := c.Status(ctx, host, Auth{Credentials: database.Controller(), Name: "db-1"}); err == nil || !strings.Contains(err.Error(), "db-1") {
		t.Errorf("Status of db-0 expecting db-1: %v, want a certificate error naming db-1", err)
	}
	other := pkitest.New()
	if _, err := c.Status(ctx, host, Auth{Credentials: other.Controller(), Name: "db-0"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Status with another database's CA: %v, want a certificate error", err)
	}
	if _, err := c.Status(ctx, host, Auth{}); err == nil {
		t.Error("Status without credentials succeeded")
	}
}

func TestClientOperations(t *testing.T) {
	database := pkitest.New()
	c, host := manager(t, database)
	ctx := context.Background()
	auth := Auth{Credentials: database.Controller(), Name: "db-0"}
	dest := Destination{S3: &S3Object{Bucket: "b", Key: "k"}}

	op, err := c.StartBackup(ctx, host, auth, BackupRequest{ID: "new", Destination: dest})
	if err != nil || op.ID != "new" || op.Phase != OperationRunning {
		t.Errorf("StartBackup: %+v %v", op, err)
	}
	if _, err := c.StartBackup(ctx, host, auth, BackupRequest{ID: "busy", Destination: dest}); !errors.Is(err, ErrBusy) {
		t.Errorf("StartBackup while another runs: %v, want ErrBusy", err)
	}
	if _, err := c.StartBackup(ctx, host, auth, BackupRequest{ID: "bad"}); !errors.Is(err, ErrRefused) {
		t.Errorf("StartBackup without a destination: %v, want ErrRefused", err)
	}
	if op, err := c.Backup(ctx, host, auth, "known"); err != nil || op.Size != 42 {
		t.Errorf("Backup: %+v %v", op, err)
	}
	if _, err := c.Backup(ctx, host, auth, "forgotten"); !errors.Is(err, ErrUnknownOperation) {
		t.Errorf("Backup of an operation the manager forgot: %v, want ErrUnknownOperation", err)
	}
	if op, err := c.Restore(ctx, host, auth); err != nil || op.Phase != OperationFailed || op.Message != "sha256 mismatch" {
		t.Errorf("Restore: %+v %v", op, err)
	}
	// An instance's certificate is of the database, but not the
	// controller's: 401 from this manager, a plain error.
	_, err = c.Backup(ctx, host, Auth{Credentials: database.Instance("db-1"), Name: "db-0"}, "known")
	if err == nil || errors.Is(err, ErrUnknownOperation) || errors.Is(err, ErrBusy) || errors.Is(err, ErrRefused) {
		t.Errorf("as an instance: %v, want a plain error", err)
	}
}
