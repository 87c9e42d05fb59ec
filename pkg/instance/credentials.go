package instance

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// CredentialIssuer is implemented by drivers that make short-lived users
// (POST /v1/credentials) and expire them.
type CredentialIssuer interface {
	// CreateCredential makes req.User with password on the writable
	// primary, logging in until req.ValidUntil with req.Role's rights in
	// the application's database, and records the requester and the
	// expiry where the replicas get them too.
	CreateCredential(ctx context.Context, req api.CredentialRequest, password string) error
	// ExpireCredentials ends the sessions of short-lived users that have
	// expired or no longer exist, and on the primary (drop) drops the
	// expired users. It answers the users it ended sessions of or dropped.
	ExpireCredentials(ctx context.Context, drop bool) ([]string, error)
}

// Bounds of a credential's lifetime the manager takes (the API server's
// are narrower): past the longest, a request is refused rather than
// trusted.
const (
	MinCredentialLifetime = 10 * time.Second
	MaxCredentialLifetime = 25 * time.Hour
)

// CredentialExpiryInterval is how often every manager ends the sessions of
// expired short-lived users and the primary drops them: a session outlives
// its credential by at most this much (plus one statement).
const CredentialExpiryInterval = 5 * time.Second

// handleCredentials serves POST /v1/credentials, to the controller's
// certificate only (the API server holds it; instances never ask).
func (m *Manager) handleCredentials(mux *http.ServeMux) {
	issuer, ok := m.driver.(CredentialIssuer)
	if !ok {
		return
	}
	mux.HandleFunc("POST "+api.PathCredentials, admit(func(w http.ResponseWriter, r *http.Request) {
		m.postCredential(w, r, issuer)
	}, pki.RoleController))
}

// writablePrimary tells whether the instance is a primary that takes
// writes; when not, it answers 409 saying it cannot do what now.
func (m *Manager) writablePrimary(w http.ResponseWriter, r *http.Request, what string) bool {
	s := m.status(r.Context(), 0)
	if s.Role == api.RolePrimary && s.Ready {
		return true
	}
	reason := s.Reason
	if s.Role != api.RolePrimary {
		reason = "not the primary"
	}
	http.Error(w, fmt.Sprintf("%s cannot %s now: %s", m.opts.Name, what, reason), http.StatusConflict)
	return false
}

func (m *Manager) postCredential(w http.ResponseWriter, r *http.Request, issuer CredentialIssuer) {
	var req api.CredentialRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if err := validateCredentialRequest(req, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	// Only a primary that takes writes makes users: the replicas get them
	// by replication, and a fenced or stopping one must write nothing.
	if !m.writablePrimary(w, r, "make users") {
		return
	}
	password, err := newPassword()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := issuer.CreateCredential(ctx, req, password); err != nil {
		m.log.Error("credential not made", "user", req.User, "for", req.Requester.Username, "err", err)
		http.Error(w, "making the user: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	m.log.Info("credential made", "user", req.User, "role", req.Role, "validUntil", req.ValidUntil.UTC().Format(time.RFC3339),
		"for", req.Requester.Username, "groups", req.Requester.Groups, "request", req.Requester.RequestID)
	writeJSON(w, http.StatusCreated, api.Credential{User: req.User, Password: password, ValidUntil: req.ValidUntil})
}

func validateCredentialRequest(req api.CredentialRequest, now time.Time) error {
	if err := api.ValidateCredentialUser(req.User); err != nil {
		return err
	}
	switch req.Role {
	case api.CredentialReadOnly, api.CredentialReadWrite:
	default:
		return fmt.Errorf("role %q must be %s or %s", req.Role, api.CredentialReadOnly, api.CredentialReadWrite)
	}
	if life := req.ValidUntil.Sub(now); life < MinCredentialLifetime || life > MaxCredentialLifetime {
		return fmt.Errorf("validUntil must be between %s and %s from now", MinCredentialLifetime, MaxCredentialLifetime)
	}
	if req.Requester.Username == "" {
		return fmt.Errorf("requester.username is required")
	}
	return nil
}

// newPassword is 32 random bytes, URL-safe: no character any engine's
// connection string or client needs quoted.
func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// expireCredentials runs until ctx ends: every CredentialExpiryInterval,
// while the engine runs unfenced, it has the driver end the expired
// users' sessions (and on a primary drop them).
func (m *Manager) expireCredentials(ctx context.Context) {
	issuer, ok := m.driver.(CredentialIssuer)
	if !ok {
		return
	}
	interval := m.opts.CredentialExpiryInterval
	if interval <= 0 {
		interval = CredentialExpiryInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m.mu.Lock()
		running := m.st.child != nil && m.st.fenced == "" && !m.stopping
		role := m.st.role
		m.mu.Unlock()
		primary := role == api.RolePrimary
		if !running || (role != api.RolePrimary && role != api.RoleReplica) {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, CredentialExpiryInterval)
		users, err := issuer.ExpireCredentials(octx, primary)
		cancel()
		if err != nil {
			// A replica still replaying, a primary promoted a moment ago:
			// the next round tries again.
			m.log.Debug("expiring credentials", "err", err)
			continue
		}
		if len(users) > 0 {
			m.log.Info("credentials expired", "users", users, "dropped", primary)
		}
	}
}
