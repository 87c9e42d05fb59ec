package instance

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// ObjectReconciler is implemented by drivers that keep the spec's
// databases and roles (POST /v1/objects).
type ObjectReconciler interface {
	// ReconcileObjects makes the databases and roles of req as it says on
	// the writable primary, and answers how each went: one result for
	// every database and every role of req.
	ReconcileObjects(ctx context.Context, req api.ObjectsRequest) []api.ObjectResult
}

// ObjectsTimeout bounds one reconciliation of the databases and roles.
const ObjectsTimeout = 5 * time.Minute

// objectsState is the last request of databases and roles and how it went.
type objectsState struct {
	mu     sync.Mutex
	asked  bool
	report api.ObjectsReport
}

func (o *objectsState) snapshot() *api.ObjectsReport {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.asked {
		return nil
	}
	r := o.report
	r.Results = append([]api.ObjectResult(nil), o.report.Results...)
	return &r
}

// handleObjects serves POST /v1/objects, to the controller's certificate
// only: the request holds the roles' passwords.
func (m *Manager) handleObjects(mux *http.ServeMux) {
	rec, ok := m.driver.(ObjectReconciler)
	if !ok {
		return
	}
	mux.HandleFunc("POST "+api.PathObjects, admit(func(w http.ResponseWriter, r *http.Request) {
		m.postObjects(w, r, rec)
	}, pki.RoleController))
}

func (m *Manager) postObjects(w http.ResponseWriter, r *http.Request, rec ObjectReconciler) {
	var req api.ObjectsRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if err := validateObjectsRequest(req); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	// Only a primary that takes writes changes them: the replicas get
	// them by replication.
	if !m.writablePrimary(w, r, "change databases and roles") {
		return
	}
	o := &m.objects
	o.mu.Lock()
	if o.report.Running {
		report, same := o.report, o.report.Hash == req.Hash
		o.mu.Unlock()
		if same {
			writeJSON(w, http.StatusAccepted, report)
			return
		}
		http.Error(w, "a reconciliation of other databases and roles is under way", http.StatusConflict)
		return
	}
	o.asked = true
	o.report.Hash, o.report.Running = req.Hash, true
	report := o.report
	o.mu.Unlock()
	go m.reconcileObjects(rec, req)
	writeJSON(w, http.StatusAccepted, report)
}

// reconcileObjects runs one request to its end, whoever asked and went.
func (m *Manager) reconcileObjects(rec ObjectReconciler, req api.ObjectsRequest) {
	ctx, cancel := context.WithTimeout(m.runContext(), ObjectsTimeout)
	defer cancel()
	start := time.Now()
	results := rec.ReconcileObjects(ctx, req)
	var failed []any
	for _, res := range results {
		if res.Error != "" {
			failed = append(failed, string(res.Kind)+" "+res.Name, res.Error)
		}
	}
	if len(failed) > 0 {
		m.log.Warn("databases and roles reconciled, some refused", append([]any{"databases", len(req.Databases), "roles", len(req.Roles)}, failed...)...)
	} else {
		m.log.Info("databases and roles reconciled", "databases", len(req.Databases), "roles", len(req.Roles), "seconds", time.Since(start).Seconds())
	}
	finished := time.Now().UTC()
	o := &m.objects
	o.mu.Lock()
	defer o.mu.Unlock()
	o.report = api.ObjectsReport{Hash: req.Hash, ResultsHash: req.Hash, FinishTime: &finished, Results: results}
}

// ObjectResults collects how each database and role of a request went,
// for the drivers: every one of the request's is reported, in its order.
type ObjectResults struct {
	list  []api.ObjectResult
	index map[api.ObjectKind]map[string]int
}

// NewObjectResults has one result for each database and role of req, none
// failed.
func NewObjectResults(req api.ObjectsRequest) *ObjectResults {
	r := &ObjectResults{index: map[api.ObjectKind]map[string]int{api.ObjectDatabase: {}, api.ObjectRole: {}}}
	add := func(kind api.ObjectKind, name string) {
		if _, ok := r.index[kind][name]; !ok {
			r.index[kind][name] = len(r.list)
			r.list = append(r.list, api.ObjectResult{Kind: kind, Name: name})
		}
	}
	for _, d := range req.Databases {
		add(api.ObjectDatabase, d.Name)
	}
	for _, role := range req.Roles {
		add(api.ObjectRole, role.Name)
	}
	return r
}

// Fail records err for the database or role (nil records nothing); a
// second error is added to the first.
func (r *ObjectResults) Fail(kind api.ObjectKind, name string, err error) {
	i, ok := r.index[kind][name]
	if err == nil || !ok {
		return
	}
	if r.list[i].Error != "" {
		r.list[i].Error += "; "
	}
	r.list[i].Error += err.Error()
}

// FailAll records err for every database and role.
func (r *ObjectResults) FailAll(err error) {
	for i := range r.list {
		r.Fail(r.list[i].Kind, r.list[i].Name, err)
	}
}

// Failed tells whether the database or role has failed so far.
func (r *ObjectResults) Failed(kind api.ObjectKind, name string) bool {
	i, ok := r.index[kind][name]
	return ok && r.list[i].Error != ""
}

// List is the results.
func (r *ObjectResults) List() []api.ObjectResult { return r.list }

var objectName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// validateObjectsRequest refuses what the API server would never send: the
// drivers quote every name, and this keeps a request they cannot take
// from reaching the engine.
func validateObjectsRequest(req api.ObjectsRequest) error {
	databases := map[string]bool{}
	for _, d := range req.Databases {
		if !objectName.MatchString(d.Name) {
			return fmt.Errorf("database %q: not a name mydb gives", d.Name)
		}
		databases[d.Name] = true
	}
	for _, r := range req.Roles {
		if !objectName.MatchString(r.Name) || len(r.Name) > api.MaxCredentialUserLength {
			return fmt.Errorf("role %q: not a name mydb gives", r.Name)
		}
		if !r.Absent && r.Password == "" {
			return fmt.Errorf("role %q: no password", r.Name)
		}
		if !PrintableASCII(r.Password) {
			return fmt.Errorf("role %q: the password must be printable ASCII", r.Name)
		}
		for db, access := range r.Privileges {
			switch access {
			case api.AccessReadOnly, api.AccessReadWrite, api.AccessAll:
			default:
				return fmt.Errorf("role %q: access %q to %q: not a level of access", r.Name, access, db)
			}
		}
	}
	return nil
}

// PrintableASCII tells whether s holds only printable ASCII characters:
// the passwords every engine and client hash alike (PostgreSQL's SCRAM
// normalizes others first, which the manager does not).
func PrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
