package mydatabase

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// spec.databases and spec.roles reach the primary's manager as one request
// (POST /v1/objects) with the roles' passwords, read from the Secrets the
// spec names; the manager reconciles them and reports each in its status,
// which the controller turns into status.databases, status.roles and the
// RolesAndDatabasesApplied condition. The request is sent again when the
// manager reports another one (the spec or a password Secret changed, the
// manager restarted, another instance became the primary), a minute after
// one that failed, and every objectsResend, which puts back what was
// changed by hand.

// ObjectsReconciler gives the primary's manager the spec's databases and
// roles: *api.Client, or a test's fake.
type ObjectsReconciler interface {
	ReconcileObjects(ctx context.Context, host string, auth api.Auth, req api.ObjectsRequest) (*api.ObjectsReport, error)
}

// Reasons of the RolesAndDatabasesApplied condition.
const (
	ReasonObjectsApplied  = "Applied"
	ReasonApplyingObjects = "Applying"
	ReasonObjectsFailed   = "Failed"
)

// How often the same databases and roles are given again, after a
// reconciliation that failed and after one that did not; how long a
// password Secret read is used.
const (
	objectsRetry    = time.Minute
	objectsResend   = 10 * time.Minute
	passwordMaxAge  = 30 * time.Second
	passwordTimeout = 5 * time.Second
)

// desiredObjects is what the spec asks of the primary: the request, the
// version of each role's password Secret in it, and the databases and
// roles left out of it, with why.
type desiredObjects struct {
	request  api.ObjectsRequest
	versions map[string]string
	pending  map[api.ObjectKind]map[string]string
}

// secretRead is one read of a password Secret.
type secretRead struct {
	secret *corev1.Secret
	err    error
	at     time.Time
}

// passwordSecrets keeps each password Secret read for passwordMaxAge: the
// controller's caches hold only mydb's own Secrets, and one GET per role
// per poll would be most of its requests.
type passwordSecrets struct {
	mu    sync.Mutex
	reads map[types.NamespacedName]secretRead
}

func (p *passwordSecrets) get(ctx context.Context, c *Controller, key types.NamespacedName) (*corev1.Secret, error) {
	now := c.clock.Now()
	p.mu.Lock()
	r, ok := p.reads[key]
	p.mu.Unlock()
	if ok && now.Sub(r.at) < passwordMaxAge {
		return r.secret, r.err
	}
	ctx, cancel := context.WithTimeout(ctx, passwordTimeout)
	defer cancel()
	secret, err := c.kubeClient.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return nil, err // not kept: the next sync asks again
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reads == nil {
		p.reads = map[types.NamespacedName]secretRead{}
	}
	for k, old := range p.reads {
		if now.Sub(old.at) > objectsResend {
			delete(p.reads, k)
		}
	}
	p.reads[key] = secretRead{secret: secret, err: err, at: now}
	return secret, err
}

// desiredObjects reads the roles' passwords and makes the request. A role
// whose password cannot be read is left out (pending), and so is a
// database it owns.
func (c *Controller) desiredObjects(ctx context.Context, db *examplev1.MyDatabase) desiredObjects {
	d := desiredObjects{versions: map[string]string{}, pending: map[api.ObjectKind]map[string]string{api.ObjectDatabase: {}, api.ObjectRole: {}}}
	for _, r := range db.Spec.Roles {
		o := api.RoleObject{Name: r.Name, Absent: r.Ensure == examplev1.EnsureAbsent}
		if !o.Absent {
			password, version, why := c.rolePassword(ctx, db.Namespace, r)
			if why != "" {
				d.pending[api.ObjectRole][r.Name] = why
				continue
			}
			o.Password, d.versions[r.Name] = password, version
			if r.ConnectionLimit != nil {
				o.ConnectionLimit = *r.ConnectionLimit
			}
			for _, p := range r.Privileges {
				if o.Privileges == nil {
					o.Privileges = map[string]api.Access{}
				}
				o.Privileges[p.Database] = api.Access(p.Access)
			}
		}
		d.request.Roles = append(d.request.Roles, o)
	}
	for _, spec := range db.Spec.Databases {
		o := api.DatabaseObject{Name: spec.Name, Owner: spec.Owner, CharacterSet: spec.CharacterSet, Collation: spec.Collation,
			Absent: spec.Ensure == examplev1.EnsureAbsent}
		if why, ok := d.pending[api.ObjectRole][spec.Owner]; ok && !o.Absent {
			d.pending[api.ObjectDatabase][spec.Name] = fmt.Sprintf("waits for its owner %q: %s", spec.Owner, why)
			continue
		}
		d.request.Databases = append(d.request.Databases, o)
	}
	d.request.Hash = objectsHash(d.request, d.versions)
	return d
}

// rolePassword reads r's password: with the Secret's resourceVersion, or
// why it cannot be had.
func (c *Controller) rolePassword(ctx context.Context, namespace string, r examplev1.RoleSpec) (password, version, why string) {
	ref := r.PasswordSecret
	if ref == nil {
		return "", "", "no passwordSecret"
	}
	secret, err := c.passwords.get(ctx, c, types.NamespacedName{Namespace: namespace, Name: ref.Name})
	switch {
	case apierrors.IsNotFound(err):
		return "", "", fmt.Sprintf("Secret %q does not exist", ref.Name)
	case apierrors.IsForbidden(err):
		return "", "", fmt.Sprintf("mydb may not read Secret %q: %v", ref.Name, err)
	case err != nil:
		// The role waits for the next sync; the rest of this one (the
		// primary's health, a failover) does not wait for a Secret.
		return "", "", fmt.Sprintf("reading Secret %q: %v", ref.Name, err)
	}
	value := strings.TrimRight(string(secret.Data[ref.Key]), "\r\n")
	switch {
	case value == "":
		return "", "", fmt.Sprintf("Secret %q has no key %q, or it is empty", ref.Name, ref.Key)
	case !instance.PrintableASCII(value):
		return "", "", fmt.Sprintf("the password in Secret %q, key %q, must be printable ASCII characters", ref.Name, ref.Key)
	}
	return value, string(secret.UID) + "/" + secret.ResourceVersion, ""
}

// objectsHash names a request by its databases and roles and the versions
// of the password Secrets, never by a password: the hash is in the
// manager's status, which more may read than the Secrets.
func objectsHash(req api.ObjectsRequest, versions map[string]string) string {
	named := req
	named.Hash = ""
	named.Roles = make([]api.RoleObject, len(req.Roles))
	for i, r := range req.Roles {
		r.Password = versions[r.Name]
		named.Roles[i] = r
	}
	b, _ := json.Marshal(named)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// objectsDue tells whether the primary's manager, which reports r, is to
// be given want now.
func objectsDue(r *api.ObjectsReport, want string, now time.Time) bool {
	switch {
	case r == nil:
		return true
	case r.Running:
		return false
	case r.Hash != want || r.ResultsHash != want || r.FinishTime == nil:
		return true
	case r.Failed():
		return now.Sub(*r.FinishTime) >= objectsRetry
	default:
		return now.Sub(*r.FinishTime) >= objectsResend
	}
}

// reconcileObjects gives the primary's manager spec.databases and
// spec.roles when due, and notes in f how they stand. Nothing it meets
// stops the sync: the primary's health and a failover come after it.
func (c *Controller) reconcileObjects(ctx context.Context, db *examplev1.MyDatabase, f *findings) {
	if len(db.Spec.Databases) == 0 && len(db.Spec.Roles) == 0 {
		return
	}
	want := c.desiredObjects(ctx, db)
	f.objects = &want
	var report *api.Status
	var primary *examplev1.InstanceStatus
	for i := range f.instances {
		if f.instances[i].Name == f.primary && i < len(f.reports) {
			primary, report = &f.instances[i], f.reports[i]
		}
	}
	if primary == nil || report == nil || !primary.Ready || db.Spec.Hibernate {
		return
	}
	f.objectsReport = report.Objects
	if !objectsDue(report.Objects, want.request.Hash, c.clock.Now()) {
		return
	}
	creds, err := c.authority.Credentials(db.Namespace, db.Name)
	if err != nil {
		return // the CA comes first; the next sync tries again
	}
	r, err := c.objects.ReconcileObjects(ctx, primary.Address, api.Auth{Credentials: creds, Name: primary.Name}, want.request)
	if err != nil {
		klog.FromContext(ctx).Info("giving the primary its databases and roles", "instance", primary.Name, "err", err)
		return
	}
	f.objectsReport = r
}

// objectsStatus is status.databases, status.roles and the
// RolesAndDatabasesApplied condition: from the primary's report of the
// request want made (a report of another request leaves each one's last
// status as it was), and the databases and roles left out of it.
func objectsStatus(db *examplev1.MyDatabase, want *desiredObjects, report *api.ObjectsReport, now metav1.Time) (databases, roles []examplev1.ManagedObjectStatus, c *metav1.Condition) {
	results := map[api.ObjectKind]map[string]api.ObjectResult{api.ObjectDatabase: {}, api.ObjectRole: {}}
	current := report != nil && !report.Running && report.ResultsHash == want.request.Hash
	if current {
		for _, r := range report.Results {
			results[r.Kind][r.Name] = r
		}
	}
	previous := map[api.ObjectKind]map[string]examplev1.ManagedObjectStatus{api.ObjectDatabase: {}, api.ObjectRole: {}}
	for _, s := range db.Status.Databases {
		previous[api.ObjectDatabase][s.Name] = s
	}
	for _, s := range db.Status.Roles {
		previous[api.ObjectRole][s.Name] = s
	}
	var failed, waiting []string
	one := func(kind api.ObjectKind, name string, ensure examplev1.Ensure) examplev1.ManagedObjectStatus {
		s := examplev1.ManagedObjectStatus{Name: name, State: examplev1.ManagedObjectPending}
		res, ok := results[kind][name]
		switch why, left := want.pending[kind][name]; {
		case left:
			s.Message = why
			waiting = append(waiting, fmt.Sprintf("%s %s (%s)", kind, name, why))
			return s
		case ok && res.Error != "":
			s.State, s.Message = examplev1.ManagedObjectFailed, res.Error
			failed = append(failed, fmt.Sprintf("%s %s: %s", kind, name, res.Error))
			return s
		case ok:
			s.State = examplev1.ManagedObjectPresent
			if ensure == examplev1.EnsureAbsent {
				s.State = examplev1.ManagedObjectAbsent
			} else if kind == api.ObjectRole {
				s.PasswordSecretVersion = resourceVersion(want.versions[name])
			}
			return s
		}
		waiting = append(waiting, fmt.Sprintf("%s %s", kind, name))
		// The last result stands until the primary reports this request's.
		if p, ok := previous[kind][name]; ok && p.State != examplev1.ManagedObjectPending {
			return p
		}
		s.Message = "the primary has yet to reconcile it"
		return s
	}
	for _, d := range db.Spec.Databases {
		databases = append(databases, one(api.ObjectDatabase, d.Name, d.Ensure))
	}
	for _, r := range db.Spec.Roles {
		roles = append(roles, one(api.ObjectRole, r.Name, r.Ensure))
	}
	c = &metav1.Condition{Type: examplev1.ConditionRolesAndDatabasesApplied, Status: metav1.ConditionFalse,
		ObservedGeneration: db.Generation, LastTransitionTime: now}
	sort.Strings(waiting)
	switch {
	case len(failed) > 0:
		c.Reason, c.Message = ReasonObjectsFailed, strings.Join(failed, "; ")
	case len(waiting) > 0 && report == nil:
		c.Reason, c.Message = ReasonApplyingObjects, "waiting for a ready primary to reconcile "+strings.Join(waiting, ", ")
	case len(waiting) > 0:
		c.Reason, c.Message = ReasonApplyingObjects, "the primary has yet to reconcile "+strings.Join(waiting, ", ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonObjectsApplied
		c.Message = fmt.Sprintf("%d databases and %d roles are as the spec says", len(databases), len(roles))
	}
	return databases, roles, c
}

// objectsEvent tells of a change of RolesAndDatabasesApplied to Failed (a
// Warning with the engine's words) or to Applied.
func (c *Controller) objectsEvent(db *examplev1.MyDatabase, f findings) {
	if f.objects == nil {
		return
	}
	_, _, cond := objectsStatus(db, f.objects, f.objectsReport, metav1.NewTime(c.clock.Now()))
	old := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionRolesAndDatabasesApplied)
	switch {
	case old != nil && old.Reason == cond.Reason && old.Message == cond.Message:
	case cond.Reason == ReasonObjectsFailed:
		c.recorder.Event(db, corev1.EventTypeWarning, "RolesAndDatabasesFailed", cond.Message)
	case cond.Reason == ReasonObjectsApplied && (old == nil || old.Reason != ReasonObjectsApplied):
		c.recorder.Event(db, corev1.EventTypeNormal, "RolesAndDatabasesApplied", cond.Message)
	}
}

// resourceVersion is the resourceVersion of a "uid/resourceVersion".
func resourceVersion(version string) string {
	_, rv, _ := strings.Cut(version, "/")
	return rv
}
