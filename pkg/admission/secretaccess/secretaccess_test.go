package secretaccess

import (
	"context"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// readable lets a user get the objects named ("secrets/s3").
func readable(names ...string) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		for _, n := range names {
			if a.GetVerb() == "get" && a.GetNamespace() == "ns" && a.GetResource()+"/"+a.GetName() == n && a.GetUser().GetName() == "tenant" {
				return authorizer.DecisionAllow, "", nil
			}
		}
		return authorizer.DecisionNoOpinion, "no RBAC rule allows it", nil
	})
}

func withS3(secret string, ca *example.CABundleSource) *example.MyDatabase {
	db := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}}
	db.Spec.Backup = &example.BackupPolicy{Destination: &example.BackupDestination{S3: &example.S3Destination{
		Endpoint: "https://s3.example.com", Bucket: "b", CredentialsSecret: example.S3CredentialsSecret{Name: secret}, CABundle: ca}}}
	return db
}

func withServerCertificate(secret string) *example.MyDatabase {
	db := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}}
	db.Spec.TLS = &example.TLSSpec{ServerCertificateSecret: secret}
	return db
}

func TestANamedSecretMustBeReadableByItsWriter(t *testing.T) {
	p := NewPlugin()
	p.SetAuthorizer(readable("secrets/s3", "configmaps/ca", "secrets/shop-tls", "secrets/alice-password"))
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	tenant := &user.DefaultInfo{Name: "tenant"}
	for _, tc := range []struct {
		name     string
		old, db  *example.MyDatabase
		sub      string
		wantPath string // "" when admitted
	}{
		{name: "a readable Secret", db: withS3("s3", nil)},
		{name: "another database's credentials", db: withS3("orders-credentials", nil), wantPath: "spec.backup.destination.s3.credentialsSecret.name"},
		{name: "its own credentials, even when readable", db: withS3("shop-credentials", nil), wantPath: "spec.backup.destination.s3.credentialsSecret.name"},
		{name: "its own instance Secret, even when readable", db: withS3("shop-instance-secrets", nil), wantPath: "spec.backup.destination.s3.credentialsSecret.name"},
		{name: "its own CA, even when readable", db: withS3("shop-ca", nil), wantPath: "spec.backup.destination.s3.credentialsSecret.name"},
		{name: "a CA bundle ConfigMap that is readable", db: withS3("s3", &example.CABundleSource{ConfigMapName: "ca", Key: "ca.crt"})},
		{name: "a CA bundle Secret that is not", db: withS3("s3", &example.CABundleSource{SecretName: "tls", Key: "ca.crt"}),
			wantPath: "spec.backup.destination.s3.caBundle.secretName"},
		{name: "an update that keeps an unreadable Secret named before", old: withS3("orders-credentials", nil), db: withS3("orders-credentials", nil)},
		{name: "an update that names an unreadable Secret", old: withS3("s3", nil), db: withS3("orders-credentials", nil),
			wantPath: "spec.backup.destination.s3.credentialsSecret.name"},
		{name: "no backup destination", db: &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}}},
		{name: "a server certificate Secret that is readable", db: withServerCertificate("shop-tls")},
		{name: "a server certificate Secret that is not", db: withServerCertificate("orders-tls"), wantPath: "spec.tls.serverCertificateSecret"},
		{name: "a role's password Secret that is readable", db: withRole("alice-password", example.EnsurePresent)},
		{name: "a role's password Secret that is not", db: withRole("orders-credentials", example.EnsurePresent), wantPath: "spec.roles[0].passwordSecret.name"},
		{name: "a role to drop: its Secret is not read", db: withRole("orders-credentials", example.EnsureAbsent)},
		{name: "the status subresource", old: withS3("s3", nil), db: withS3("orders-credentials", nil), sub: "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := admission.Create
			if tc.old != nil {
				op = admission.Update
			}
			var old runtime.Object
			if tc.old != nil {
				old = tc.old
			}
			a := admission.NewAttributesRecord(tc.db, old, example.Kind("MyDatabase").WithVersion("v1"), "ns", "shop",
				example.Resource("mydatabases").WithVersion("v1"), tc.sub, op, nil, false, tenant)
			err := p.Validate(context.Background(), a, nil)
			if tc.wantPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.wantPath) {
				t.Fatalf("got %v, want 403 naming %s", err, tc.wantPath)
			}
		})
	}
}

func withRole(secret string, ensure example.Ensure) *example.MyDatabase {
	return &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}, Spec: example.MyDatabaseSpec{
		Roles: []example.RoleSpec{{Name: "alice", Ensure: ensure, PasswordSecret: &example.SecretKeySelector{Name: secret, Key: "password"}}},
	}}
}
