package api

import (
	"context"
	"net/http"
	"time"
)

// PathObjects is where the controller gives the primary's manager the
// databases and roles the MyDatabase's spec keeps (POST ObjectsRequest ->
// 202 ObjectsReport): the manager reconciles them in the background and
// reports how it went in Status.Objects.
const PathObjects = "/v1/objects"

// Access is a role's level of access to a database.
type Access string

// The levels of access (the API's DatabaseAccess).
const (
	AccessNone      Access = ""
	AccessReadOnly  Access = "ReadOnly"
	AccessReadWrite Access = "ReadWrite"
	AccessAll       Access = "All"
)

// ObjectsRequest is every database and role the spec keeps, with the
// roles' passwords.
type ObjectsRequest struct {
	// Hash names this desired state (the spec's objects and the versions
	// of the password Secrets, never a password): the manager reports the
	// hash it reconciled.
	Hash      string           `json:"hash"`
	Databases []DatabaseObject `json:"databases,omitempty"`
	Roles     []RoleObject     `json:"roles,omitempty"`
}

// DatabaseObject is one database of the spec.
type DatabaseObject struct {
	Name string `json:"name"`
	// Owner is a role of the request, or empty for the application user.
	Owner        string `json:"owner,omitempty"`
	CharacterSet string `json:"characterSet,omitempty"`
	Collation    string `json:"collation,omitempty"`
	// Absent drops the database.
	Absent bool `json:"absent,omitempty"`
}

// RoleObject is one role of the spec.
type RoleObject struct {
	Name     string `json:"name"`
	Password string `json:"password,omitempty"`
	// ConnectionLimit is 0 for unlimited.
	ConnectionLimit int32 `json:"connectionLimit,omitempty"`
	// Privileges are the role's access by database: the application's
	// or one of the request's. It has none to the request's others.
	Privileges map[string]Access `json:"privileges,omitempty"`
	// Absent ends the role's sessions and drops it.
	Absent bool `json:"absent,omitempty"`
}

// ObjectKind tells a database's result from a role's.
type ObjectKind string

// The kinds of objects.
const (
	ObjectDatabase ObjectKind = "database"
	ObjectRole     ObjectKind = "role"
)

// ObjectResult is how one database or role of a request went.
type ObjectResult struct {
	Kind ObjectKind `json:"kind"`
	Name string     `json:"name"`
	// Error says what the engine refused; empty, the database or role is
	// as the request says.
	Error string `json:"error,omitempty"`
}

// ObjectsReport is the manager's last reconciliation of a request.
type ObjectsReport struct {
	Hash string `json:"hash"`
	// Running tells that the reconciliation goes on; Results and
	// FinishTime are then the previous one's, of PreviousHash.
	Running    bool           `json:"running,omitempty"`
	FinishTime *time.Time     `json:"finishTime,omitempty"`
	Results    []ObjectResult `json:"results,omitempty"`
	// ResultsHash is the hash of the request Results are of.
	ResultsHash string `json:"resultsHash,omitempty"`
}

// Failed tells whether any database or role of the report's results was
// refused.
func (r *ObjectsReport) Failed() bool {
	for _, res := range r.Results {
		if res.Error != "" {
			return true
		}
	}
	return false
}

// ReconcileObjects is POST /v1/objects. ErrBusy (409) means the instance
// is not a ready primary, or reconciles another request.
func (c *Client) ReconcileObjects(ctx context.Context, host string, auth Auth, req ObjectsRequest) (*ObjectsReport, error) {
	return call[ObjectsReport](ctx, c, http.MethodPost, host, PathObjects, auth, req)
}
