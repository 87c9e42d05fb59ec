package mydatabase

import (
	"crypto/x509"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// syncs runs one sync of a database at a time, each on the objects the
// one before left: its Secrets as the fake API server holds them after,
// its status as the sync wrote it.
type syncs struct {
	t        *testing.T
	db       *examplev1.MyDatabase
	children []runtime.Object
	statuses fakeStatuses
	last     *fixture
}

// step syncs once, checks the writes to the main cluster, and answers the
// database's status.
func (s *syncs) step(wantKube []string) examplev1.MyDatabaseStatus {
	s.t.Helper()
	f := newFixture(s.t, []*examplev1.MyDatabase{s.db}, s.children...)
	f.statuses = s.statuses
	if err := f.sync(); err != nil {
		s.t.Fatal(err)
	}
	if diff := cmp.Diff(wantKube, writes(f.kubeClient.Actions())); diff != "" {
		s.t.Errorf("writes to the main cluster (-want +got):\n%s", diff)
	}
	list, err := f.kubeClient.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "secrets"},
		corev1.SchemeGroupVersion.WithKind("Secret"), s.db.Namespace)
	if err != nil {
		s.t.Fatal(err)
	}
	s.children = slices.DeleteFunc(s.children, func(o runtime.Object) bool { _, ok := o.(*corev1.Secret); return ok })
	for i := range list.(*corev1.SecretList).Items {
		s.children = append(s.children, &list.(*corev1.SecretList).Items[i])
	}
	s.last = f
	for _, a := range f.mydbClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			s.db.Status = u.GetObject().(*examplev1.MyDatabase).Status
		}
	}
	return s.db.Status
}

// TestCARotationTakesEachStepWhenEveryInstanceTookTheLast drives a
// rotation of a database's CA through the controller, one sync at a time
// on the objects the previous one left: the CA Secret changes only when
// every instance reported the step before; the Secrets the pods and the
// applications read follow the CA Secret (the immutable credentials
// Secret is made again with the same password); the status says where
// the rotation is and what it waits for.
func TestCARotationTakesEachStepWhenEveryInstanceTookTheLast(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.Annotations = map[string]string{names.RotateCAAnnotation: "2026-12-05T12:00:00Z"}
	run := &syncs{t: t, db: db, children: children, statuses: statuses}
	step := run.step
	secret := func(name string) *corev1.Secret {
		for _, o := range run.children {
			if s, ok := o.(*corev1.Secret); ok && s.Name == name {
				return s
			}
		}
		t.Fatalf("no Secret %s", name)
		return nil
	}
	roots := func(name string) []string {
		certs, err := pki.ParseCerts(secret(name).Data["ca.crt"])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range certs {
			out = append(out, pki.Fingerprint(c))
		}
		return out
	}
	report := func(change func(name string, c *api.Certificates)) {
		for ip, s := range statuses {
			c := &api.Certificates{}
			if s.Certificates != nil {
				c = s.Certificates
			}
			change(s.Name, c)
			s.Certificates = c
			statuses[ip] = s
		}
	}
	password := string(secret("prod-mysql-credentials").Data["password"])
	oldRoot := roots("prod-mysql-ca")[0]

	// A new annotation: the new root is made, trusted next to the old.
	status := step([]string{"update secrets prod-mysql-ca"})
	expectEvent(t, run.last.recorder, "Normal CARotationStarted")
	if len(secret("prod-mysql-ca").Data["next-ca.key"]) == 0 || secret("prod-mysql-ca").Annotations[names.CARotatedForAnnotation] != "2026-12-05T12:00:00Z" {
		t.Fatalf("the CA Secret holds no next root or not the request it began for: %v", secret("prod-mysql-ca").Annotations)
	}
	newRoot := pki.Fingerprint(mustParse(t, secret("prod-mysql-ca").Data["next-ca.crt"]))

	// The bundles follow; the credentials Secret goes, to be made again.
	status = step([]string{"update secrets prod-mysql-certificates", "update secrets prod-mysql-ca-bundle", "delete secrets prod-mysql-credentials"})
	for _, name := range []string{"prod-mysql-certificates", "prod-mysql-ca-bundle"} {
		if got := roots(name); !slices.Equal(got, []string{oldRoot, newRoot}) {
			t.Errorf("%s trusts %v, want the old root and the new", name, got)
		}
	}
	if ca := status.CertificateAuthority; ca == nil || ca.Rotation != "Introducing" || ca.Fingerprint != oldRoot ||
		ca.Message != "waiting for [prod-mysql-0 prod-mysql-1 prod-mysql-2] to answer (they must trust the new root)" {
		t.Errorf("status.certificateAuthority = %+v", ca)
	}

	// Two instances trust the new root, one does not yet: nothing moves.
	report(func(name string, c *api.Certificates) {
		c.Roots = []string{oldRoot}
		if name != "prod-mysql-2" {
			c.Roots = append(c.Roots, newRoot)
		}
	})
	status = step([]string{"create secrets prod-mysql-credentials"})
	if got := roots("prod-mysql-credentials"); !slices.Equal(got, []string{oldRoot, newRoot}) || string(secret("prod-mysql-credentials").Data["password"]) != password {
		t.Errorf("the credentials Secret made again trusts %v, want both roots and the same password", got)
	}
	if ca := status.CertificateAuthority; ca.Message != "waiting for [prod-mysql-2] to trust the new root" {
		t.Errorf("status.certificateAuthority.message = %q", ca.Message)
	}

	// All do: the new root signs.
	// They hold a certificate of the old issuer, as real managers say.
	oldIssuer := pki.Fingerprint(mustParse(t, secret("prod-mysql-certificates").Data["issuer.crt"]))
	report(func(_ string, c *api.Certificates) { c.Roots, c.Issuer = []string{oldRoot, newRoot}, oldIssuer })
	step([]string{"update secrets prod-mysql-ca"})
	expectEvent(t, run.last.recorder, "Normal CARotationSwitched")
	status = step([]string{"update secrets prod-mysql-certificates", "update secrets prod-mysql-ca-bundle", "delete secrets prod-mysql-credentials"})
	issuer := mustParse(t, secret("prod-mysql-certificates").Data["issuer.crt"])
	if got := roots("prod-mysql-certificates"); !slices.Equal(got, []string{newRoot, oldRoot}) || pki.Fingerprint(mustParse(t, secret("prod-mysql-ca").Data["ca.crt"])) != newRoot {
		t.Errorf("after the switch the instances trust %v and the CA Secret signs with %s", got, roots("prod-mysql-ca"))
	}
	if err := issuer.CheckSignatureFrom(mustParse(t, secret("prod-mysql-ca").Data["ca.crt"])); err != nil {
		t.Errorf("the issuer is not of the new root: %v", err)
	}
	if ca := status.CertificateAuthority; ca.Rotation != "Switched" || ca.Fingerprint != newRoot {
		t.Errorf("status.certificateAuthority = %+v", ca)
	}

	// Every instance holds a certificate of the new issuer: the old root
	// leaves the bundles; the rotation ends when no instance trusts it.
	report(func(_ string, c *api.Certificates) { c.Issuer = pki.Fingerprint(issuer) })
	step([]string{"create secrets prod-mysql-credentials", "update secrets prod-mysql-ca"})
	expectEvent(t, run.last.recorder, "Normal CARotated")
	status = step([]string{"update secrets prod-mysql-certificates", "update secrets prod-mysql-ca-bundle", "delete secrets prod-mysql-credentials"})
	if got := roots("prod-mysql-ca-bundle"); !slices.Equal(got, []string{newRoot}) {
		t.Errorf("the CA bundle holds %v, want the new root alone", got)
	}
	if ca := status.CertificateAuthority; ca.Rotation != "Retiring" || ca.LastRotationTime != nil {
		t.Errorf("status.certificateAuthority = %+v, want Retiring", ca)
	}
	report(func(_ string, c *api.Certificates) { c.Roots = []string{newRoot} })
	status = step([]string{"create secrets prod-mysql-credentials"})
	if ca := status.CertificateAuthority; ca.Rotation != "" || ca.Message != "" || ca.LastRotationTime == nil {
		t.Errorf("status.certificateAuthority = %+v, want the rotation done", ca)
	}
	// The same annotation asks nothing more.
	step(nil)
}

func mustParse(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCerts(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// TestAnImmutableCASecretIsMadeAgainMutable: an earlier mydb's CA Secret,
// immutable, cannot record a rotation: it is copied, deleted and made
// again, mutable, from the copy, which then goes; meanwhile the managers
// are called with the copy's root, and no sync makes a new CA.
func TestAnImmutableCASecretIsMadeAgainMutable(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	var original []byte
	for _, o := range children {
		if s, ok := o.(*corev1.Secret); ok && s.Name == "prod-mysql-ca" {
			s.Immutable = ptr.To(true)
			original = s.Data["ca.key"]
		}
	}
	run := &syncs{t: t, db: db, children: children, statuses: statuses}
	step := func(wantKube []string) *fixture { run.step(wantKube); return run.last }
	step([]string{"create secrets prod-mysql-ca-copy", "delete secrets prod-mysql-ca"})
	// The CA Secret gone, its copy there: the managers are still read,
	// with the copy's root, and no new CA is made.
	f := step([]string{"create secrets prod-mysql-ca", "delete secrets prod-mysql-ca-copy"})
	// Every instance answered as before: no status to write.
	if got := writes(f.mydbClient.Actions()); len(got) != 0 {
		t.Errorf("writes to mydb %v, want none: the instances answered with the copy's root", got)
	}
	for _, a := range f.kubeClient.Actions() {
		if c, ok := a.(core.CreateAction); ok && c.GetObject().(*corev1.Secret).Name == "prod-mysql-ca" {
			made := c.GetObject().(*corev1.Secret)
			if made.Immutable == nil || *made.Immutable || string(made.Data["ca.key"]) != string(original) {
				t.Errorf("the CA Secret made again: immutable %v, the same key %v", made.Immutable, string(made.Data["ca.key"]) == string(original))
			}
		}
	}
	step(nil)
}
