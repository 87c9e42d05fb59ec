package mydatabase

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/access"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"
)

// TunnelTarget finds where an instance of a database serves clients
// (pkg/access): instance is example.ConnectToPrimary, ConnectToReplica or
// an instance's name.
type TunnelTarget interface {
	InstanceAddress(db *example.MyDatabase, instance string) (address, name string, err error)
}

// ConnectREST is the storage of mydatabases/connect: a POST upgraded to
// access.TunnelProtocol becomes a TCP tunnel to the engine port of the
// primary (or of a replica, or of a named instance: the instance option),
// the way pods/portforward is one to a pod. RBAC's create on
// mydatabases/connect is all it takes: no pods/portforward, no network
// path to the pods, no Secret (the engine still asks for a login:
// mydatabases/credentials gives one).
type ConnectREST struct {
	databases rest.Getter
	// target is nil in a server that runs no controllers.
	target TunnelTarget
	dialer net.Dialer
}

var _ rest.Connecter = &ConnectREST{}

// New returns an empty MyDatabase: the subresource takes no body.
func (r *ConnectREST) New() runtime.Object { return &example.MyDatabase{} }

// Destroy does nothing: the store belongs to REST.
func (r *ConnectREST) Destroy() {}

// SetTarget sets who finds the primaries (built with the controllers).
func (r *ConnectREST) SetTarget(target TunnelTarget) { r.target = target }

// ConnectMethods is POST only: the verb RBAC checks is create.
func (r *ConnectREST) ConnectMethods() []string { return []string{http.MethodPost} }

// NewConnectOptions are MyDatabaseConnectOptions, from the query.
func (r *ConnectREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &example.MyDatabaseConnectOptions{}, false, ""
}

// Connect opens the tunnel to the instance the options name (the primary
// when they name none) of the MyDatabase called name: 404 for no such
// database, 422 for an instance it does not have, 409 while it is being
// deleted, 503 while the instance is not ready, 400 for a request that is
// not the upgrade.
func (r *ConnectREST) Connect(ctx context.Context, name string, options runtime.Object, _ rest.Responder) (http.Handler, error) {
	instance := ""
	if o, ok := options.(*example.MyDatabaseConnectOptions); ok {
		instance = o.Instance
	}
	got, err := r.databases.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	db := got.(*example.MyDatabase)
	if errs := validateConnectInstance(db, instance); len(errs) > 0 {
		return nil, apierrors.NewInvalid(example.Kind("MyDatabaseConnectOptions"), name, errs)
	}
	if db.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(example.Resource("mydatabases"), name, errors.New("the database is being deleted"))
	}
	if r.target == nil {
		return nil, apierrors.NewServiceUnavailable("this server runs no controllers: it cannot reach the database's instances")
	}
	address, target, err := r.target.InstanceAddress(db, instance)
	if err != nil {
		unavailable := apierrors.NewServiceUnavailable(err.Error())
		unavailable.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 5}
		return nil, unavailable
	}
	user := "unknown"
	if u, ok := genericrequest.UserFrom(ctx); ok {
		user = u.GetName()
	}
	return &tunnel{address: address, instance: target, who: user, db: db.Namespace + "/" + db.Name, dialer: &r.dialer}, nil
}

type tunnel struct {
	address, instance, who, db string
	dialer                     *net.Dialer
}

func (t *tunnel) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !strings.EqualFold(req.Header.Get("Upgrade"), access.TunnelProtocol) ||
		!strings.Contains(strings.ToLower(req.Header.Get("Connection")), "upgrade") {
		http.Error(w, fmt.Sprintf("mydatabases/connect is an HTTP upgrade to %s (kubectl mydb connect makes it)", access.TunnelProtocol), http.StatusBadRequest)
		return
	}
	hijacker, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "this connection cannot be upgraded (HTTP/2?): use HTTP/1.1", http.StatusBadRequest)
		return
	}
	dialCtx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
	backend, err := t.dialer.DialContext(dialCtx, "tcp", t.address)
	cancel()
	if err != nil {
		http.Error(w, fmt.Sprintf("the instance %s does not answer: %v", t.instance, err), http.StatusServiceUnavailable)
		return
	}
	conn, buffered, err := hijacker.Hijack()
	if err != nil {
		backend.Close()
		return
	}
	if _, err := buffered.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + access.TunnelProtocol +
		"\r\n" + access.TunnelInstanceHeader + ": " + t.instance + "\r\n\r\n"); err != nil || buffered.Flush() != nil {
		conn.Close()
		backend.Close()
		return
	}
	opened := time.Now()
	klog.V(2).InfoS("Tunnel opened", "database", t.db, "instance", t.instance, "user", t.who)
	up, down := access.Join(backend, buffered.Reader, conn)
	klog.V(2).InfoS("Tunnel closed", "database", t.db, "instance", t.instance, "user", t.who,
		"duration", time.Since(opened).Round(time.Millisecond), "bytesToEngine", up, "bytesFromEngine", down)
}

// validateConnectInstance allows primary (or nothing), replica, and the
// names of db's instances (<name>-<ordinal>, below its replicas).
func validateConnectInstance(db *example.MyDatabase, instance string) field.ErrorList {
	switch instance {
	case "", example.ConnectToPrimary, example.ConnectToReplica:
		return nil
	}
	if ordinal, ok := strings.CutPrefix(instance, db.Name+"-"); ok {
		if n, err := strconv.Atoi(ordinal); err == nil && n >= 0 && n < int(db.Spec.Replicas) && strconv.Itoa(n) == ordinal {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(field.NewPath("instance"), instance,
		[]string{example.ConnectToPrimary, example.ConnectToReplica, db.Name + "-<ordinal below spec.replicas>"})}
}
