package instance

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// credentialDriver is the fake driver with short-lived users: it records
// what it was asked to make and each expiry round's drop.
type credentialDriver struct {
	*fakeDriver
	mu        sync.Mutex
	made      []api.CredentialRequest
	passwords []string
	drops     []bool
}

func (d *credentialDriver) CreateCredential(_ context.Context, req api.CredentialRequest, password string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.made, d.passwords = append(d.made, req), append(d.passwords, password)
	return nil
}

func (d *credentialDriver) ExpireCredentials(_ context.Context, drop bool) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drops = append(d.drops, drop)
	return nil, nil
}

func TestCredentialsAreMadeOnlyOnTheReadyPrimaryForTheController(t *testing.T) {
	driver := &credentialDriver{fakeDriver: &fakeDriver{}}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", func(o *Options) { o.CredentialExpiryInterval = 20 * time.Millisecond })
	h.src <- Topology{Primary: "db-1", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a running replica", func(s api.Status) bool { return s.EngineRunning })

	valid := api.CredentialRequest{User: api.CredentialUser("alice", "r1"), Role: api.CredentialReadOnly,
		ValidUntil: time.Now().Add(time.Hour), Requester: api.Requester{Username: "alice", RequestID: "r1"}}
	client := &api.Client{}
	if _, err := client.CreateCredential(context.Background(), h.addr, api.Auth{Credentials: testDatabase.Controller(), Name: "db-0"}, valid); !errors.Is(err, api.ErrBusy) {
		t.Errorf("a replica made a user: %v, want ErrBusy (409)", err)
	}
	// A replica's expiry rounds end sessions and drop nothing.
	pollCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := PollUntil(pollCtx, 10*time.Millisecond, func() error {
		driver.mu.Lock()
		defer driver.mu.Unlock()
		if len(driver.drops) == 0 {
			return errors.New("no expiry round yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.src <- Topology{Primary: "db-0"}
	h.wait("a ready primary", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })

	// Only the controller's certificate (the API server's) may ask.
	if code, _ := h.callAs(testDatabase.Instance("db-1"), "POST", api.PathCredentials, valid); code != http.StatusForbidden {
		t.Errorf("an instance asked: %d, want 403", code)
	}
	if code, _ := h.callAs(nil, "POST", api.PathCredentials, valid); code != http.StatusUnauthorized {
		t.Errorf("no certificate: %d, want 401", code)
	}
	for name, req := range map[string]api.CredentialRequest{
		"a user without the prefix":   {User: "alice", Role: valid.Role, ValidUntil: valid.ValidUntil, Requester: valid.Requester},
		"a user with a quote":         {User: "k8s_a'b", Role: valid.Role, ValidUntil: valid.ValidUntil, Requester: valid.Requester},
		"an unknown role":             {User: valid.User, Role: "superuser", ValidUntil: valid.ValidUntil, Requester: valid.Requester},
		"an expiry in the past":       {User: valid.User, Role: valid.Role, ValidUntil: time.Now().Add(-time.Minute), Requester: valid.Requester},
		"an expiry two days from now": {User: valid.User, Role: valid.Role, ValidUntil: time.Now().Add(48 * time.Hour), Requester: valid.Requester},
		"no requester":                {User: valid.User, Role: valid.Role, ValidUntil: valid.ValidUntil},
	} {
		if code, msg := h.call("POST", api.PathCredentials, req); code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", name, code, msg)
		}
	}
	if code, _ := h.call("POST", api.PathCredentials, `{"user":`); code != http.StatusBadRequest {
		t.Errorf("a malformed body: %d, want 400", code)
	}

	cred, err := client.CreateCredential(context.Background(), h.addr, api.Auth{Credentials: testDatabase.Controller(), Name: "db-0"}, valid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a few of the primary's expiry rounds
	driver.mu.Lock()
	defer driver.mu.Unlock()
	if len(driver.made) != 1 || driver.made[0].User != valid.User || driver.passwords[0] != cred.Password {
		t.Fatalf("made %+v with %q, answered %+v", driver.made, driver.passwords, cred)
	}
	if len(cred.Password) < 40 || strings.ContainsAny(cred.Password, `'"\ :@/?#`) {
		t.Errorf("password %q: want 32 random bytes, URL-safe", cred.Password)
	}
	// The primary's rounds drop users too.
	sawReplica, sawPrimary := false, false
	for _, drop := range driver.drops {
		sawReplica, sawPrimary = sawReplica || !drop, sawPrimary || drop
	}
	if !sawReplica || !sawPrimary {
		t.Errorf("expiry rounds %v: want both a replica's and a primary's", driver.drops)
	}
}

func TestCredentialUserNames(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range []struct{ user, prefix string }{
		{"alice@example.com", "k8s_alice_example_com_"},
		{"system:serviceaccount:team-a:reporting-job", "k8s_sa_team_a_reporting_"},
		{"ÄÖÜ", "k8s_user_"},
		{"__x__", "k8s_x_"},
	} {
		name := api.CredentialUser(tc.user, "request-1")
		if err := api.ValidateCredentialUser(name); err != nil {
			t.Errorf("%s: %v", tc.user, err)
		}
		if !strings.HasPrefix(name, tc.prefix) || len(name) > api.MaxCredentialUserLength {
			t.Errorf("%s: %q, want %s... of at most %d characters", tc.user, name, tc.prefix, api.MaxCredentialUserLength)
		}
		seen[name] = true
	}
	if api.CredentialUser("alice", "request-1") == api.CredentialUser("alice", "request-2") {
		t.Error("two requests of one user got the same database user")
	}
}
