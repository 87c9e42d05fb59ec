package postgres

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

var _ instance.ObjectReconciler = (*Driver)(nil)

// ReconcileObjects implements instance.ObjectReconciler, in the order that
// lets each step find what it needs: the roles to keep, the databases to
// keep (their owners exist), each role's privileges in each database mydb
// keeps, then the databases and the roles to drop.
//
// Privileges are granted on every schema of a database but the
// engine's, on what exists and by default on what the database's owner
// makes later. The application's database is the application user's.
func (d *Driver) ReconcileObjects(ctx context.Context, req api.ObjectsRequest) []api.ObjectResult {
	results := instance.NewObjectResults(req)
	app, err := d.appUser()
	if err != nil {
		results.FailAll(err)
		return results.List()
	}
	pool, err := d.adminPool()
	if err != nil {
		results.FailAll(err)
		return results.List()
	}
	for _, r := range req.Roles {
		if !r.Absent {
			results.Fail(api.ObjectRole, r.Name, d.keepRole(ctx, pool, r))
		}
	}
	owners := map[string]string{app.database: app.user}
	for _, db := range req.Databases {
		if db.Absent {
			continue
		}
		owner := db.Owner
		if owner == "" {
			owner = app.user
		}
		owners[db.Name] = owner
		if results.Failed(api.ObjectRole, db.Owner) {
			results.Fail(api.ObjectDatabase, db.Name, fmt.Errorf("its owner %q could not be made", db.Owner))
			continue
		}
		results.Fail(api.ObjectDatabase, db.Name, d.keepDatabase(ctx, pool, db, owner))
	}
	for name, owner := range owners {
		if results.Failed(api.ObjectDatabase, name) {
			continue
		}
		for role, err := range d.grant(ctx, name, owner, req.Roles, results) {
			results.Fail(api.ObjectRole, role, fmt.Errorf("privileges in %q: %w", name, err))
		}
	}
	for _, db := range req.Databases {
		if db.Absent {
			_, err := pool.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)")
			results.Fail(api.ObjectDatabase, db.Name, err)
		}
	}
	for _, r := range req.Roles {
		if r.Absent {
			results.Fail(api.ObjectRole, r.Name, d.dropRole(ctx, pool, r.Name, app.user))
		}
	}
	return results.List()
}

// keepRole makes the role, or makes it as the request says: it logs in
// with the password, holds no power over the server and has the
// connection limit. A role that is so already is not written (the stored
// SCRAM verifier is checked against the password).
func (d *Driver) keepRole(ctx context.Context, pool *pgxpool.Pool, r api.RoleObject) error {
	name := pgx.Identifier{r.Name}.Sanitize()
	limit := int64(-1)
	if r.ConnectionLimit > 0 {
		limit = int64(r.ConnectionLimit)
	}
	var (
		stored *string
		as     bool
	)
	// as: the role already has every attribute below.
	err := pool.QueryRow(ctx, `SELECT rolpassword, COALESCE(rolcanlogin AND NOT rolsuper AND NOT rolcreatedb AND NOT rolcreaterole
		AND NOT rolreplication AND NOT rolbypassrls AND rolinherit AND rolconnlimit = $2 AND rolvaliduntil = 'infinity', false)
		FROM pg_authid WHERE rolname = $1`, r.Name, limit).Scan(&stored, &as)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	attrs := fmt.Sprintf("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT CONNECTION LIMIT %d VALID UNTIL 'infinity'", limit)
	if exists && stored != nil && scramMatches(*stored, r.Password) {
		if as {
			return nil // nothing written
		}
		_, err := pool.Exec(ctx, "ALTER ROLE "+name+" "+attrs)
		return err
	}
	verifier, err := scramVerifier(r.Password)
	if err != nil {
		return err
	}
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	_, err = pool.Exec(ctx, verb+" ROLE "+name+" "+attrs+" PASSWORD "+quoteLiteral(verifier))
	return err
}

// scramMatches tells whether a stored SCRAM-SHA-256 secret is password's.
func scramMatches(stored, password string) bool {
	rest, ok := strings.CutPrefix(stored, "SCRAM-SHA-256$")
	if !ok {
		return false
	}
	iterSalt, _, ok := strings.Cut(rest, "$")
	if !ok {
		return false
	}
	iter, salt64, ok := strings.Cut(iterSalt, ":")
	if !ok {
		return false
	}
	iterations, err := strconv.Atoi(iter)
	if err != nil || iterations < 1 || iterations > 1<<22 {
		return false
	}
	salt, err := base64.StdEncoding.DecodeString(salt64)
	if err != nil {
		return false
	}
	want, err := scramVerifierWithSalt(password, salt, iterations)
	return err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(stored)) == 1
}

// keepDatabase makes the database, owned by owner and connectable only by
// those granted it, or gives it to owner.
func (d *Driver) keepDatabase(ctx context.Context, pool *pgxpool.Pool, db api.DatabaseObject, owner string) error {
	name, ownerID := pgx.Identifier{db.Name}.Sanitize(), pgx.Identifier{owner}.Sanitize()
	var current string
	err := pool.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", db.Name).Scan(&current)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		create := "CREATE DATABASE " + name + " OWNER " + ownerID + " TEMPLATE template0"
		if db.CharacterSet != "" {
			create += " ENCODING " + quoteLiteral(db.CharacterSet)
		}
		if db.Collation != "" {
			create += " LC_COLLATE " + quoteLiteral(db.Collation) + " LC_CTYPE " + quoteLiteral(db.Collation)
		}
		if _, err := pool.Exec(ctx, create); err != nil {
			return err
		}
		// PUBLIC may connect to a new database and make temporary tables
		// in it: here only its owner and the roles granted it may.
		_, err = pool.Exec(ctx, "REVOKE ALL ON DATABASE "+name+" FROM PUBLIC")
		return err
	case err != nil:
		return err
	case current != owner:
		_, err := pool.Exec(ctx, "ALTER DATABASE "+name+" OWNER TO "+ownerID)
		return err
	}
	return nil
}

// grant gives each role of roles to keep the privileges the request gives
// it in database, and takes the others away, in one transaction: a
// session never sees a role between the two. The database's owner keeps
// what it owns. It answers the roles it failed for.
func (d *Driver) grant(ctx context.Context, database, owner string, roles []api.RoleObject, results *instance.ObjectResults) map[string]error {
	failed := map[string]error{}
	var keep []api.RoleObject
	for _, r := range roles {
		if !r.Absent && r.Name != owner && !results.Failed(api.ObjectRole, r.Name) {
			keep = append(keep, r)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	conn, err := d.connectTo(ctx, database)
	if err != nil {
		for _, r := range keep {
			failed[r.Name] = err
		}
		return failed
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' ORDER BY nspname`)
	if err != nil {
		for _, r := range keep {
			failed[r.Name] = err
		}
		return failed
	}
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		for _, r := range keep {
			failed[r.Name] = err
		}
		return failed
	}
	for _, r := range keep {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, s := range privilegeStatements(database, owner, schemas, r.Name, r.Privileges[database]) {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		})
		if err != nil {
			failed[r.Name] = err
		}
	}
	return failed
}

// privilegeStatements take every privilege of role in database away and
// give it those of access: on the database, on each schema and what it
// holds, and by default on what owner makes later.
func privilegeStatements(database, owner string, schemas []string, role string, access api.Access) []string {
	r, o, db := pgx.Identifier{role}.Sanitize(), pgx.Identifier{owner}.Sanitize(), pgx.Identifier{database}.Sanitize()
	stmts := []string{"REVOKE ALL ON DATABASE " + db + " FROM " + r}
	for _, s := range schemas {
		s := pgx.Identifier{s}.Sanitize()
		stmts = append(stmts,
			"REVOKE ALL ON SCHEMA "+s+" FROM "+r,
			"REVOKE ALL ON ALL TABLES IN SCHEMA "+s+" FROM "+r,
			"REVOKE ALL ON ALL SEQUENCES IN SCHEMA "+s+" FROM "+r,
			"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA "+s+" FROM "+r)
	}
	stmts = append(stmts,
		"ALTER DEFAULT PRIVILEGES FOR ROLE "+o+" REVOKE ALL ON TABLES FROM "+r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE "+o+" REVOKE ALL ON SEQUENCES FROM "+r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE "+o+" REVOKE ALL ON FUNCTIONS FROM "+r)
	var onDatabase, onSchema, onTables, onSequences, onFunctions string
	switch access {
	case api.AccessNone:
		return stmts
	case api.AccessReadOnly:
		onDatabase, onSchema, onTables, onSequences, onFunctions = "CONNECT, TEMPORARY", "USAGE", "SELECT", "SELECT", "EXECUTE"
	case api.AccessReadWrite:
		onDatabase, onSchema, onTables, onSequences, onFunctions = "CONNECT, TEMPORARY", "USAGE", "SELECT, INSERT, UPDATE, DELETE", "USAGE, SELECT, UPDATE", "EXECUTE"
	default:
		onDatabase, onSchema, onTables, onSequences, onFunctions = "ALL", "ALL", "ALL", "ALL", "ALL"
	}
	stmts = append(stmts, "GRANT "+onDatabase+" ON DATABASE "+db+" TO "+r)
	for _, s := range schemas {
		s := pgx.Identifier{s}.Sanitize()
		stmts = append(stmts,
			"GRANT "+onSchema+" ON SCHEMA "+s+" TO "+r,
			"GRANT "+onTables+" ON ALL TABLES IN SCHEMA "+s+" TO "+r,
			"GRANT "+onSequences+" ON ALL SEQUENCES IN SCHEMA "+s+" TO "+r,
			"GRANT "+onFunctions+" ON ALL FUNCTIONS IN SCHEMA "+s+" TO "+r)
	}
	return append(stmts,
		"ALTER DEFAULT PRIVILEGES FOR ROLE "+o+" GRANT "+onTables+" ON TABLES TO "+r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE "+o+" GRANT "+onSequences+" ON SEQUENCES TO "+r,
		"ALTER DEFAULT PRIVILEGES FOR ROLE "+o+" GRANT "+onFunctions+" ON FUNCTIONS TO "+r)
}

// dropRole ends the role's sessions and drops it: in every database what
// it owns goes to the database's owner (the application user for the
// databases it owned itself) and its privileges go.
func (d *Driver) dropRole(ctx context.Context, pool *pgxpool.Pool, role, appUser string) error {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil || !exists {
		return err
	}
	r, app := pgx.Identifier{role}.Sanitize(), pgx.Identifier{appUser}.Sanitize()
	if _, err := pool.Exec(ctx, "ALTER ROLE "+r+" NOLOGIN"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datallowconn ORDER BY datname")
	if err != nil {
		return err
	}
	type database struct{ name, owner string }
	databases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (database, error) {
		var db database
		return db, row.Scan(&db.name, &db.owner)
	})
	if err != nil {
		return err
	}
	for _, db := range databases {
		if db.owner == role {
			if _, err := pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db.name}.Sanitize()+" OWNER TO "+app); err != nil {
				return err
			}
			db.owner = appUser
		}
		conn, err := d.connectTo(ctx, db.name)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "REASSIGN OWNED BY "+r+" TO "+pgx.Identifier{db.owner}.Sanitize())
		if err == nil {
			_, err = conn.Exec(ctx, "DROP OWNED BY "+r)
		}
		conn.Close(context.Background())
		if err != nil {
			return fmt.Errorf("in %q: %w", db.name, err)
		}
	}
	_, err = pool.Exec(ctx, "DROP ROLE "+r)
	return err
}

// connectTo connects to database as the superuser over the socket.
func (d *Driver) connectTo(ctx context.Context, database string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable application_name=mydb-instance connect_timeout=5",
		d.cfg.RunDir, d.cfg.Port, superuser, quoteConnValue(database)))
}
