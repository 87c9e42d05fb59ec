package mydatabase

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/access"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

type databaseGetter map[string]*example.MyDatabase

func (g databaseGetter) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if db, ok := g[name]; ok {
		return db.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(example.Resource("mydatabases"), name)
}

// recordingIssuer answers err, or a credential for what it was asked.
type recordingIssuer struct {
	asked []api.CredentialRequest
	err   error
}

func (i *recordingIssuer) Issue(_ context.Context, db *example.MyDatabase, req api.CredentialRequest) (*access.Issued, error) {
	i.asked = append(i.asked, req)
	if i.err != nil {
		return nil, i.err
	}
	return &access.Issued{Credential: api.Credential{User: req.User, Password: "pw", ValidUntil: req.ValidUntil},
		Instance: db.Status.CurrentPrimary, Database: "shop", CACertificate: []byte("CA")}, nil
}

func TestCredentialsREST(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	shop := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"},
		Spec: example.MyDatabaseSpec{Engine: "mariadb"}, Status: example.MyDatabaseStatus{CurrentPrimary: "shop-1"}}
	gone := shop.DeepCopy()
	gone.Name, gone.DeletionTimestamp = "gone", &metav1.Time{Time: now}
	alice := genericrequest.WithUser(context.Background(), &user.DefaultInfo{Name: "alice@example.com", Groups: []string{"dba"}})
	alice = audit.WithAuditContext(alice)
	audit.WithAuditID(alice, "0c0ffee0-0000-4000-8000-000000000001")
	request := func(role example.CredentialRole, seconds *int64) *example.MyDatabaseCredentialRequest {
		return &example.MyDatabaseCredentialRequest{Spec: example.MyDatabaseCredentialRequestSpec{Role: role, ExpirationSeconds: seconds}}
	}
	newREST := func(issuer CredentialIssuer) *CredentialsREST {
		r := &CredentialsREST{databases: databaseGetter{"shop": shop, "gone": gone}, clock: clocktesting.NewFakePassiveClock(now)}
		if issuer != nil {
			r.SetIssuer(issuer)
		}
		return r
	}

	t.Run("a credential for the requester, named after them, expiring when asked", func(t *testing.T) {
		issuer := &recordingIssuer{}
		got, err := newREST(issuer).Create(alice, "shop", request(example.CredentialRoleReadWrite, ptr.To[int64](600)), nil, &metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		answer := got.(*example.MyDatabaseCredentialRequest)
		if len(issuer.asked) != 1 {
			t.Fatalf("asked %d times", len(issuer.asked))
		}
		asked := issuer.asked[0]
		want := api.CredentialRequest{
			User: api.CredentialUser("alice@example.com", "0c0ffee0-0000-4000-8000-000000000001"), Role: api.CredentialReadWrite,
			ValidUntil: now.Add(10 * time.Minute),
			Requester:  api.Requester{Username: "alice@example.com", Groups: []string{"dba"}, RequestID: "0c0ffee0-0000-4000-8000-000000000001"},
		}
		if fmt.Sprint(asked) != fmt.Sprint(want) {
			t.Errorf("asked %+v\nwant  %+v", asked, want)
		}
		s := answer.Status
		if s.Username != want.User || s.Password != "pw" || !s.ExpirationTimestamp.Time.Equal(want.ValidUntil) || s.Instance != "shop-1" ||
			s.Host != "shop-rw.ns.svc" || s.ReadOnlyHost != "shop-ro.ns.svc" || s.Port != 3306 || s.Database != "shop" || s.CACertificate != "CA" {
			t.Errorf("answer %+v", s)
		}
	})
	t.Run("defaults: readonly for an hour", func(t *testing.T) {
		issuer := &recordingIssuer{}
		if _, err := newREST(issuer).Create(alice, "shop", request("", nil), nil, &metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if a := issuer.asked[0]; a.Role != api.CredentialReadOnly || !a.ValidUntil.Equal(now.Add(time.Hour)) {
			t.Errorf("asked %+v", a)
		}
	})
	t.Run("dry run asks no instance", func(t *testing.T) {
		issuer := &recordingIssuer{}
		got, err := newREST(issuer).Create(alice, "shop", request("", nil), nil, &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if len(issuer.asked) != 0 || got.(*example.MyDatabaseCredentialRequest).Status.Password != "" {
			t.Errorf("dry run asked %d times, answered %+v", len(issuer.asked), got)
		}
	})
	t.Run("admission sees the defaulted request and may refuse it", func(t *testing.T) {
		issuer := &recordingIssuer{}
		var seen example.CredentialRole
		refuse := func(_ context.Context, obj runtime.Object) error {
			seen = obj.(*example.MyDatabaseCredentialRequest).Spec.Role
			return apierrors.NewForbidden(example.Resource("mydatabases"), "shop", errors.New("no"))
		}
		_, err := newREST(issuer).Create(alice, "shop", request("", nil), refuse, &metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || seen != example.CredentialRoleReadOnly || len(issuer.asked) != 0 {
			t.Errorf("%v, admission saw role %q, issuer asked %d times", err, seen, len(issuer.asked))
		}
	})
	for _, tc := range []struct {
		name   string
		db     string
		ctx    context.Context
		issuer CredentialIssuer
		req    *example.MyDatabaseCredentialRequest
		is     func(error) bool
		want   string
	}{
		{"unknown database", "nope", alice, &recordingIssuer{}, request("", nil), apierrors.IsNotFound, "404"},
		{"unknown role", "shop", alice, &recordingIssuer{}, request("owner", nil), apierrors.IsInvalid, "422"},
		{"too long a lifetime", "shop", alice, &recordingIssuer{}, request("", ptr.To[int64](86401)), apierrors.IsInvalid, "422"},
		{"a database being deleted", "gone", alice, &recordingIssuer{}, request("", nil), apierrors.IsConflict, "409"},
		{"no user", "shop", context.Background(), &recordingIssuer{}, request("", nil), apierrors.IsForbidden, "403"},
		{"no primary to make it", "shop", alice, &recordingIssuer{err: fmt.Errorf("%w: the primary shop-1 is not ready", access.ErrUnavailable)},
			request("", nil), apierrors.IsServiceUnavailable, "503"},
		{"no controllers", "shop", alice, nil, request("", nil), apierrors.IsServiceUnavailable, "503"},
	} {
		t.Run(tc.want+" for "+tc.name, func(t *testing.T) {
			r := newREST(nil)
			if tc.issuer != nil {
				r.SetIssuer(tc.issuer)
			}
			if _, err := r.Create(tc.ctx, tc.db, tc.req, nil, &metav1.CreateOptions{}); !tc.is(err) {
				t.Errorf("%v, want %s", err, tc.want)
			}
		})
	}
}
