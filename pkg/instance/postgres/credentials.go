package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

var _ instance.CredentialIssuer = (*Driver)(nil)

// readOnlyGroup is the role every readonly short-lived user is a member
// of: it may connect to the application's database and read all data
// (pg_read_all_data), nothing else.
const readOnlyGroup = "mydb_readonly"

// credentialRecord is the role's comment: who the user was made for. It is
// in a shared catalog, so it replicates with the role.
type credentialRecord struct {
	Role       api.CredentialRole `json:"role"`
	ValidUntil time.Time          `json:"validUntil"`
	Requester  api.Requester      `json:"requester"`
}

// CreateCredential implements instance.CredentialIssuer. The password
// expires in the engine (VALID UNTIL): past it no login succeeds, whether
// or not a manager has dropped the user yet. A readwrite user acts as the
// application user (SET role at login), so what it creates is the
// application's; a readonly one reads everything and its transactions are
// read-only besides.
func (d *Driver) CreateCredential(ctx context.Context, req api.CredentialRequest, password string) error {
	if err := api.ValidateCredentialUser(req.User); err != nil {
		return err
	}
	app, err := d.appUser()
	if err != nil {
		return err
	}
	verifier, err := scramVerifier(password)
	if err != nil {
		return err
	}
	record, err := json.Marshal(credentialRecord{Role: req.Role, ValidUntil: req.ValidUntil.UTC(), Requester: req.Requester})
	if err != nil {
		return err
	}
	pool, err := d.adminPool()
	if err != nil {
		return err
	}
	user := pgx.Identifier{req.User}.Sanitize()
	appUser, appDB := pgx.Identifier{app.user}.Sanitize(), pgx.Identifier{app.database}.Sanitize()
	validUntil := quoteLiteral(req.ValidUntil.UTC().Format(time.RFC3339Nano))
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	// Two first readonly requests at once would both make the group.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('mydb credentials'))"); err != nil {
		return err
	}
	create := fmt.Sprintf("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD %s VALID UNTIL %s",
		user, quoteLiteral(verifier), validUntil)
	var stmts []string
	switch req.Role {
	case api.CredentialReadOnly:
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", readOnlyGroup).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			group := pgx.Identifier{readOnlyGroup}.Sanitize()
			stmts = append(stmts,
				fmt.Sprintf("CREATE ROLE %s NOLOGIN", group),
				fmt.Sprintf("GRANT pg_read_all_data TO %s", group),
				fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", appDB, group))
		}
		stmts = append(stmts, create+" IN ROLE "+pgx.Identifier{readOnlyGroup}.Sanitize(),
			fmt.Sprintf("ALTER ROLE %s SET default_transaction_read_only = on", user))
	case api.CredentialReadWrite:
		stmts = append(stmts, create+" IN ROLE "+appUser,
			fmt.Sprintf("ALTER ROLE %s SET role = %s", user, quoteLiteral(app.user)))
	default:
		return fmt.Errorf("unknown role %q", req.Role)
	}
	stmts = append(stmts, fmt.Sprintf("COMMENT ON ROLE %s IS %s", user, quoteLiteral(string(record))))
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// ExpireCredentials implements instance.CredentialIssuer: the sessions of
// expired short-lived users and of users dropped since they logged in end
// on every instance; the primary then gives what an expired user owns in
// the application's database to the application user and drops it.
func (d *Driver) ExpireCredentials(ctx context.Context, drop bool) ([]string, error) {
	pool, err := d.adminPool()
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT rolname FROM pg_roles
		WHERE starts_with(rolname, $1) AND rolvaliduntil IS NOT NULL AND rolvaliduntil <= now() ORDER BY rolname`, api.CredentialUserPrefix)
	if err != nil {
		return nil, err
	}
	expired, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var ended []string
	rows, err = pool.Query(ctx, `SELECT DISTINCT coalesce(a.usename, '(dropped user ' || a.usesysid || ')'),
			pg_terminate_backend(a.pid)
		FROM pg_stat_activity a LEFT JOIN pg_roles r ON r.oid = a.usesysid
		WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
		  AND (r.oid IS NULL OR a.usename = ANY($1))`, expired)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var terminated bool
		if err := rows.Scan(&name, &terminated); err != nil {
			rows.Close()
			return nil, err
		}
		ended = append(ended, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !drop || len(expired) == 0 {
		return ended, nil
	}
	app, err := d.appUser()
	if err != nil {
		return ended, err
	}
	// REASSIGN and DROP OWNED act in the database they run in: the
	// application's, where a user could have made something.
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable application_name=mydb-instance connect_timeout=5",
		d.cfg.RunDir, d.cfg.Port, superuser, quoteConnValue(app.database)))
	if err != nil {
		return ended, err
	}
	defer conn.Close(context.Background())
	var errs []error
	for _, name := range expired {
		user := pgx.Identifier{name}.Sanitize()
		for _, s := range []string{
			fmt.Sprintf("REASSIGN OWNED BY %s TO %s", user, pgx.Identifier{app.user}.Sanitize()),
			fmt.Sprintf("DROP OWNED BY %s", user),
			fmt.Sprintf("DROP ROLE IF EXISTS %s", user),
		} {
			if _, err := conn.Exec(ctx, s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				break
			}
		}
		ended = append(ended, name)
	}
	return ended, errors.Join(errs...)
}

// quoteConnValue quotes a value of a key=value connection string.
func quoteConnValue(s string) string {
	b := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}
