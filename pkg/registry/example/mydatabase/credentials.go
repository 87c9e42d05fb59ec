package mydatabase

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/mydb-dev/mydb/pkg/access"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/validation"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/audit"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/clock"
)

// CredentialIssuer makes a short-lived user on a database's primary
// (pkg/access).
type CredentialIssuer interface {
	Issue(ctx context.Context, db *example.MyDatabase, req api.CredentialRequest) (*access.Issued, error)
}

// CredentialsREST is the storage of mydatabases/credentials, shaped like
// serviceaccounts/token: a POST answers a database user that logs in for
// spec.expirationSeconds, and nothing of the answer is stored. RBAC's
// create on mydatabases/credentials lets a user ask; the role's own verb
// there (the MyDatabaseCredentialRole admission plugin) decides which role
// it may have.
type CredentialsREST struct {
	// databases reads the MyDatabase (the main store).
	databases rest.Getter
	// issuer is nil in a server that runs no controllers: every request
	// then answers 503.
	issuer CredentialIssuer
	clock  clock.PassiveClock
}

var _ rest.NamedCreater = &CredentialsREST{}

// New returns an empty credential request.
func (r *CredentialsREST) New() runtime.Object { return &example.MyDatabaseCredentialRequest{} }

// Destroy does nothing: the store belongs to REST.
func (r *CredentialsREST) Destroy() {}

// SetIssuer sets who makes the users (the controllers' informers and CA,
// built after the storage).
func (r *CredentialsREST) SetIssuer(issuer CredentialIssuer) { r.issuer = issuer }

var credentialRequestKind = example.Kind("MyDatabaseCredentialRequest")

// Create makes a user on the primary of the MyDatabase called name: 404
// when there is no such database, 422 for a bad role or lifetime, 409
// while it is being deleted, 503 (with Retry-After) while no primary can
// make it. With dryRun it checks everything and makes nothing.
func (r *CredentialsREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*example.MyDatabaseCredentialRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a MyDatabaseCredentialRequest, got %T", obj))
	}
	req = req.DeepCopy()
	if req.Spec.Role == "" {
		req.Spec.Role = example.CredentialRoleReadOnly
	}
	if req.Spec.ExpirationSeconds == nil {
		seconds := int64(validation.DefaultCredentialSeconds)
		req.Spec.ExpirationSeconds = &seconds
	}
	if errs := validation.ValidateCredentialRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(credentialRequestKind, name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	got, err := r.databases.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	db := got.(*example.MyDatabase)
	if db.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(example.Resource("mydatabases"), name, errors.New("the database is being deleted"))
	}
	user, ok := genericrequest.UserFrom(ctx)
	if !ok || user.GetName() == "" {
		return nil, apierrors.NewForbidden(example.Resource("mydatabases"), name, errors.New("a credential is made for an authenticated user, and this request has none"))
	}
	// The audit ID ties the user the engine shows to the API request in
	// kube-apiserver's audit log (the aggregator passes it on).
	requestID := uuid.NewString()
	if id, ok := audit.AuditIDFrom(ctx); ok && id != "" {
		requestID = string(id)
	}
	now := r.clock.Now()
	validUntil := now.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second).UTC().Truncate(time.Second)
	grant := api.CredentialRequest{
		User:       api.CredentialUser(user.GetName(), requestID),
		Role:       api.CredentialRole(req.Spec.Role),
		ValidUntil: validUntil,
		Requester:  api.Requester{Username: user.GetName(), Groups: user.GetGroups(), RequestID: requestID},
	}
	answer := &example.MyDatabaseCredentialRequest{
		ObjectMeta: metav1.ObjectMeta{Name: db.Name, Namespace: db.Namespace, CreationTimestamp: metav1.NewTime(now)},
		Spec:       req.Spec,
		Status: example.MyDatabaseCredentialRequestStatus{
			Username:            grant.User,
			ExpirationTimestamp: metav1.NewTime(validUntil),
			Host:                names.ReadWriteService(db.Name) + "." + db.Namespace + ".svc",
			ReadOnlyHost:        names.ReadOnlyService(db.Name) + "." + db.Namespace + ".svc",
		},
	}
	if eng, ok := engine.Lookup(string(db.Spec.Engine)); ok {
		answer.Status.Port = eng.Port
	}
	if len(options.DryRun) > 0 {
		return answer, nil
	}
	if r.issuer == nil {
		return nil, apierrors.NewServiceUnavailable("this server runs no controllers: it cannot reach the database's instances")
	}
	issued, err := r.issuer.Issue(ctx, db, grant)
	if err != nil {
		unavailable := apierrors.NewServiceUnavailable(err.Error())
		unavailable.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: 5}
		return nil, unavailable
	}
	answer.Status.Password = issued.Credential.Password
	answer.Status.Instance = issued.Instance
	answer.Status.Database = issued.Database
	answer.Status.CACertificate = string(issued.CACertificate)
	answer.Status.ServerName = issued.ServerName
	return answer, nil
}
