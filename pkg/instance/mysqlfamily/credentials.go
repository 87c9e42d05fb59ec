package mysqlfamily

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

var _ instance.CredentialIssuer = (*Server)(nil)

// CredentialsTable records every short-lived user: its role, expiry and
// requester. A table in the data, so it replicates: a promoted replica
// expires what its primary made. (Neither engine has a login expiry of its
// own finer than days; the managers enforce it.)
const CredentialsTable = "mydb_meta.credentials"

// datetimeLayout is how a DATETIME(6) in UTC is written.
const datetimeLayout = "2006-01-02 15:04:05.000000"

// CreateCredential implements instance.CredentialIssuer: the record first,
// so no user exists without its expiry.
func (s *Server) CreateCredential(ctx context.Context, req api.CredentialRequest, password string) error {
	if err := api.ValidateCredentialUser(req.User); err != nil {
		return err
	}
	app, _, err := s.Credentials()
	if err != nil {
		return err
	}
	record, err := json.Marshal(req.Requester)
	if err != nil {
		return err
	}
	c, err := s.Admin()
	if err != nil {
		return err
	}
	return c.Exec(ctx, CredentialStatements(s.Dialect, app.Database, req, password, string(record))...)
}

// CredentialStatements make req.User with password and its record.
func CredentialStatements(d Dialect, database string, req api.CredentialRequest, password, record string) []string {
	account := Account(req.User, "%")
	privileges := "SELECT, SHOW VIEW"
	if req.Role == api.CredentialReadWrite {
		privileges = "ALL PRIVILEGES"
	}
	return []string{
		"CREATE DATABASE IF NOT EXISTS mydb_meta",
		"CREATE TABLE IF NOT EXISTS " + CredentialsTable + " (user VARCHAR(32) NOT NULL PRIMARY KEY, role VARCHAR(16) NOT NULL, " +
			"valid_until DATETIME(6) NOT NULL, requester TEXT NOT NULL) ENGINE=InnoDB",
		fmt.Sprintf("INSERT INTO %s (user, role, valid_until, requester) VALUES (%s, %s, %s, %s)", CredentialsTable,
			QuoteString(req.User), QuoteString(string(req.Role)), QuoteString(req.ValidUntil.UTC().Format(datetimeLayout)), QuoteString(record)),
		d.CreateUserStatement(account, password),
		fmt.Sprintf("GRANT %s ON %s.* TO %s", privileges, QuoteIdent(database), account),
	}
}

// ExpireCredentials implements instance.CredentialIssuer: every instance
// ends the sessions of expired short-lived users and of those dropped
// since they logged in; the primary drops the expired users and their
// records.
func (s *Server) ExpireCredentials(ctx context.Context, drop bool) ([]string, error) {
	c, err := s.Admin()
	if err != nil {
		return nil, err
	}
	row, err := c.QueryRow(ctx, ExpiredCredentialsQuery)
	if err != nil {
		return nil, err
	}
	expired := splitList(row["users"])
	row, err = c.QueryRow(ctx, OrphanSessionsQuery(expired))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, id := range splitList(row["ids"]) {
		// A session that ended on its own meanwhile is no error.
		if err := c.Exec(ctx, "KILL CONNECTION "+id); err != nil && !strings.Contains(err.Error(), "1094") {
			errs = append(errs, err)
		}
	}
	ended := splitList(row["users"])
	if drop {
		for _, user := range expired {
			if err := c.Exec(ctx, DropCredentialStatements(user)...); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", user, err))
				continue
			}
			ended = append(ended, user)
		}
	}
	return ended, errors.Join(errs...)
}

// ExpiredCredentialsQuery reads, as column users, the comma-separated
// short-lived users whose time is up (none while the table does not exist).
var ExpiredCredentialsQuery = fmt.Sprintf(`SELECT (SELECT GROUP_CONCAT(user ORDER BY user SEPARATOR ',') FROM %s
	WHERE valid_until <= UTC_TIMESTAMP(6)) AS users FROM information_schema.tables
	WHERE table_schema = 'mydb_meta' AND table_name = 'credentials'`, CredentialsTable)

// OrphanSessionsQuery reads, as columns ids and users, the sessions of
// the short-lived users expired and of those that no longer exist.
func OrphanSessionsQuery(expired []string) string {
	cond := "user NOT IN (SELECT user FROM mysql.user)"
	if len(expired) > 0 {
		quoted := make([]string, len(expired))
		for i, u := range expired {
			quoted[i] = QuoteString(u)
		}
		cond = fmt.Sprintf("(%s OR user IN (%s))", cond, strings.Join(quoted, ", "))
	}
	return fmt.Sprintf(`SELECT GROUP_CONCAT(id SEPARATOR ',') AS ids, GROUP_CONCAT(DISTINCT user SEPARATOR ',') AS users
	FROM information_schema.processlist WHERE user LIKE %s AND id <> CONNECTION_ID() AND %s`,
		QuoteString(strings.ReplaceAll(api.CredentialUserPrefix, "_", `\_`)+"%"), cond)
}

// DropCredentialStatements drop an expired user and its record.
func DropCredentialStatements(user string) []string {
	return []string{
		"DROP USER IF EXISTS " + Account(user, "%"),
		fmt.Sprintf("DELETE FROM %s WHERE user = %s", CredentialsTable, QuoteString(user)),
	}
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
