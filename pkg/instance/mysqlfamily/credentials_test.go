package mysqlfamily

import (
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// testDialect is enough of a Dialect for the statements that use it.
type testDialect struct{ Dialect }

func (testDialect) CreateUserStatement(account, password string) string {
	return "CREATE USER " + account + " IDENTIFIED BY " + QuoteString(password)
}

func TestCredentialStatements(t *testing.T) {
	req := api.CredentialRequest{User: "k8s_alice_0a1b2c3d", Role: api.CredentialReadOnly,
		ValidUntil: time.Date(2026, 12, 5, 10, 0, 0, 500000000, time.FixedZone("CET", 3600))}
	got := CredentialStatements(testDialect{}, "shop`db", req, "pw", `{"username":"alice's"}`)
	want := []string{
		"CREATE DATABASE IF NOT EXISTS mydb_meta",
		"CREATE TABLE IF NOT EXISTS mydb_meta.credentials (user VARCHAR(32) NOT NULL PRIMARY KEY, role VARCHAR(16) NOT NULL, valid_until DATETIME(6) NOT NULL, requester TEXT NOT NULL) ENGINE=InnoDB",
		// The record first, in UTC: no user exists without its expiry.
		`INSERT INTO mydb_meta.credentials (user, role, valid_until, requester) VALUES ('k8s_alice_0a1b2c3d', 'readonly', '2026-12-05 09:00:00.500000', '{"username":"alice\'s"}')`,
		"CREATE USER 'k8s_alice_0a1b2c3d'@'%' IDENTIFIED BY 'pw'",
		"GRANT SELECT, SHOW VIEW ON `shop``db`.* TO 'k8s_alice_0a1b2c3d'@'%'",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	req.Role = api.CredentialReadWrite
	if got := CredentialStatements(testDialect{}, "shop", req, "pw", "{}"); got[4] != "GRANT ALL PRIVILEGES ON `shop`.* TO 'k8s_alice_0a1b2c3d'@'%'" {
		t.Errorf("readwrite: %s", got[4])
	}
}

func TestOrphanSessionsQuery(t *testing.T) {
	q := OrphanSessionsQuery([]string{"k8s_a_1", "k8s_b_2"})
	for _, want := range []string{`user LIKE 'k8s\\_%'`, "user NOT IN (SELECT user FROM mysql.user)", "user IN ('k8s_a_1', 'k8s_b_2')", "id <> CONNECTION_ID()"} {
		if !strings.Contains(q, want) {
			t.Errorf("%s\nlacks %s", q, want)
		}
	}
	if q := OrphanSessionsQuery(nil); strings.Contains(q, " IN (") && !strings.Contains(q, "NOT IN (SELECT") {
		t.Errorf("no expired users: %s", q)
	}
	if got := DropCredentialStatements("k8s_a_1"); got[0] != "DROP USER IF EXISTS 'k8s_a_1'@'%'" || got[1] != "DELETE FROM mydb_meta.credentials WHERE user = 'k8s_a_1'" {
		t.Errorf("drop: %v", got)
	}
}
