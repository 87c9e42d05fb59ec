package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// PathCredentials is where the primary's manager makes a short-lived
// database user (POST CredentialRequest -> 201 Credential).
const PathCredentials = "/v1/credentials"

// CredentialRole is what a short-lived user may do in the application's
// database.
type CredentialRole string

const (
	// CredentialReadOnly reads every table of the application's database
	// and changes nothing.
	CredentialReadOnly CredentialRole = "readonly"
	// CredentialReadWrite has the application user's rights.
	CredentialReadWrite CredentialRole = "readwrite"
)

// CredentialUserPrefix starts the name of every short-lived user, and of
// no other: the managers find the users they expire by it.
const CredentialUserPrefix = "k8s_"

// MaxCredentialUserLength is the longest user name every engine takes
// (MySQL's 32 characters).
const MaxCredentialUserLength = 32

// CredentialRequest asks the primary's manager for a database user that
// logs in until ValidUntil with Role's rights.
type CredentialRequest struct {
	// User is the user's name: CredentialUserPrefix, then [a-z0-9_] only,
	// at most MaxCredentialUserLength characters.
	User       string         `json:"user"`
	Role       CredentialRole `json:"role"`
	ValidUntil time.Time      `json:"validUntil"`
	// Requester is who asked, recorded with the user in the database so
	// its records name the person behind a session.
	Requester Requester `json:"requester"`
}

// Requester is the Kubernetes identity a credential was made for.
type Requester struct {
	Username  string   `json:"username"`
	Groups    []string `json:"groups,omitempty"`
	RequestID string   `json:"requestID,omitempty"`
}

// Credential is the user the manager made: its password exists only in this
// answer (the engine keeps a hash).
type Credential struct {
	User       string    `json:"user"`
	Password   string    `json:"password"`
	ValidUntil time.Time `json:"validUntil"`
}

// CreateCredential is POST /v1/credentials on the primary's manager.
// ErrBusy (409) means the instance is not a running primary; ErrRefused
// (422, 501) a request it will never take.
func (c *Client) CreateCredential(ctx context.Context, host string, auth Auth, req CredentialRequest) (*Credential, error) {
	return call[Credential](ctx, c, http.MethodPost, host, PathCredentials, auth, req)
}

// CredentialUser is the database user name for a credential of the
// Kubernetes user username, made by the request requestID: the name the
// engine's own views (pg_stat_activity, the processlist) show, so it says
// who is connected, with a hash of both that makes every credential its
// own user.
func CredentialUser(username, requestID string) string {
	sum := sha256.Sum256([]byte(username + "\x00" + requestID))
	suffix := "_" + hex.EncodeToString(sum[:4])
	// A service account's prefix would fill the name's room.
	readable := username
	if rest, ok := strings.CutPrefix(username, "system:serviceaccount:"); ok {
		readable = "sa:" + rest
	}
	var b strings.Builder
	underscore := false
	for _, r := range strings.ToLower(readable) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			underscore = false
		case !underscore && b.Len() > 0:
			b.WriteByte('_')
			underscore = true
		}
	}
	name := strings.TrimRight(b.String(), "_")
	if max := MaxCredentialUserLength - len(CredentialUserPrefix) - len(suffix); len(name) > max {
		name = strings.TrimRight(name[:max], "_")
	}
	if name == "" {
		name = "user"
	}
	return CredentialUserPrefix + name + suffix
}

// ValidateCredentialUser tells whether name is one CredentialUser could
// make: the managers put it into SQL as an identifier and expire users by
// its prefix.
func ValidateCredentialUser(name string) error {
	if !strings.HasPrefix(name, CredentialUserPrefix) || len(name) > MaxCredentialUserLength || len(name) <= len(CredentialUserPrefix) {
		return fmt.Errorf("user %q must start with %q and have at most %d characters", name, CredentialUserPrefix, MaxCredentialUserLength)
	}
	for _, r := range name {
		if !((r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_') {
			return fmt.Errorf("user %q may hold only a-z, 0-9 and _", name)
		}
	}
	return nil
}
