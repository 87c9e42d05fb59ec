package mysqlfamily

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

var _ instance.ObjectReconciler = (*Server)(nil)

// ReconcileObjects implements instance.ObjectReconciler: the roles to keep,
// the databases to keep, each role's privileges on each database mydb
// keeps (the owner has all of them: the engine has no owners), then the
// databases and the roles to drop. Every statement is binlogged, so the
// replicas get the same.
func (s *Server) ReconcileObjects(ctx context.Context, req api.ObjectsRequest) []api.ObjectResult {
	results := instance.NewObjectResults(req)
	app, _, err := s.Credentials()
	if err != nil {
		results.FailAll(err)
		return results.List()
	}
	c, err := s.Admin()
	if err != nil {
		results.FailAll(err)
		return results.List()
	}
	for _, r := range req.Roles {
		if !r.Absent {
			results.Fail(api.ObjectRole, r.Name, s.keepRole(ctx, c, r))
		}
	}
	for _, db := range req.Databases {
		switch {
		case db.Absent:
		case db.Owner != "" && results.Failed(api.ObjectRole, db.Owner):
			results.Fail(api.ObjectDatabase, db.Name, fmt.Errorf("its owner %q could not be made", db.Owner))
		default:
			results.Fail(api.ObjectDatabase, db.Name, keepDatabase(ctx, c, db))
		}
	}
	for _, g := range Grants(app, req) {
		if results.Failed(api.ObjectDatabase, g.Database) || results.Failed(api.ObjectRole, g.User) {
			continue
		}
		err := s.grant(ctx, c, g)
		if err == nil {
			continue
		}
		err = fmt.Errorf("privileges on %q: %w", g.Database, err)
		if g.User == app.User {
			results.Fail(api.ObjectDatabase, g.Database, err)
		} else {
			results.Fail(api.ObjectRole, g.User, err)
		}
	}
	for _, db := range req.Databases {
		if db.Absent {
			results.Fail(api.ObjectDatabase, db.Name, c.Exec(ctx, "DROP DATABASE IF EXISTS "+QuoteIdent(db.Name)))
		}
	}
	for _, r := range req.Roles {
		if r.Absent {
			results.Fail(api.ObjectRole, r.Name, dropRole(ctx, c, r.Name))
		}
	}
	return results.List()
}

// keepRole makes the role, or makes it as the request says: its password
// (set only when the engine cannot tell it is the same) and its limit of
// connections (set only when it differs), so a resend of a role that is
// as asked writes nothing (MySQL's password aside).
func (s *Server) keepRole(ctx context.Context, c Conn, r api.RoleObject) error {
	account := Account(r.Name, "%")
	row, err := c.QueryRow(ctx, "SELECT authentication_string, max_user_connections FROM mysql.user WHERE user = "+QuoteString(r.Name)+" AND host = '%'")
	if err != nil {
		return err
	}
	var stmts []string
	switch {
	case row == nil:
		stmts = append(stmts, s.Dialect.CreateUserStatement(account, r.Password))
	case !s.Dialect.PasswordIs(row["authentication_string"], r.Password):
		stmts = append(stmts, s.Dialect.AlterPasswordStatement(account, r.Password))
	}
	if limit := fmt.Sprint(r.ConnectionLimit); row == nil || row["max_user_connections"] != limit {
		stmts = append(stmts, fmt.Sprintf("ALTER USER %s WITH MAX_USER_CONNECTIONS %s", account, limit))
	}
	if len(stmts) == 0 {
		return nil
	}
	return c.Exec(ctx, stmts...)
}

// keepDatabase makes db unless it exists: CREATE DATABASE IF NOT EXISTS
// is binlogged even when it changes nothing.
func keepDatabase(ctx context.Context, c Conn, db api.DatabaseObject) error {
	row, err := c.QueryRow(ctx, "SELECT 1 AS found FROM information_schema.schemata WHERE schema_name = "+QuoteString(db.Name))
	if err != nil || row != nil {
		return err
	}
	return c.Exec(ctx, CreateDatabaseStatement(db))
}

// CreateDatabaseStatement makes db, with its character set and collation,
// unless it exists.
func CreateDatabaseStatement(db api.DatabaseObject) string {
	stmt := "CREATE DATABASE IF NOT EXISTS " + QuoteIdent(db.Name)
	if db.CharacterSet != "" {
		stmt += " CHARACTER SET " + QuoteIdent(db.CharacterSet)
	}
	if db.Collation != "" {
		stmt += " COLLATE " + QuoteIdent(db.Collation)
	}
	return stmt
}

// Grant is the access one user is to have to one database.
type Grant struct {
	User, Database string
	Access         api.Access
}

// Grants are the privileges every role of req and the application user
// are to have on each database mydb keeps: a database's owner all, a role
// what the request gives it, nothing else. The application's database is
// the application user's as bootstrap made it: only the roles' access to
// it is kept. On a database to drop nobody is left any, so one made again
// later under its name starts with none.
func Grants(app App, req api.ObjectsRequest) []Grant {
	owners := map[string]string{}
	databases := []string{app.Database}
	for _, db := range req.Databases {
		databases = append(databases, db.Name)
		if !db.Absent {
			owners[db.Name] = cmpOr(db.Owner, app.User)
		}
	}
	var grants []Grant
	for _, database := range databases {
		_, kept := owners[database]
		if database != app.Database {
			access := api.AccessNone
			if owners[database] == app.User {
				access = api.AccessAll
			}
			grants = append(grants, Grant{User: app.User, Database: database, Access: access})
		}
		for _, r := range req.Roles {
			if r.Absent {
				continue
			}
			access := r.Privileges[database]
			switch {
			case owners[database] == r.Name:
				access = api.AccessAll
			case database != app.Database && !kept:
				access = api.AccessNone
			}
			grants = append(grants, Grant{User: r.Name, Database: database, Access: access})
		}
	}
	return grants
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// grantPrivileges are the privileges of each level of access, as
// mysql.db's columns name them.
var grantPrivileges = map[api.Access][]string{
	api.AccessReadOnly:  {"Select_priv", "Show_view_priv"},
	api.AccessReadWrite: {"Delete_priv", "Insert_priv", "Select_priv", "Show_view_priv", "Update_priv"},
}

// grantStatement is the GRANT of access's privileges.
var grantStatement = map[api.Access]string{
	api.AccessReadOnly:  "SELECT, SHOW VIEW",
	api.AccessReadWrite: "SELECT, INSERT, UPDATE, DELETE, SHOW VIEW",
	api.AccessAll:       "ALL PRIVILEGES",
}

// grant gives g.User g.Access on g.Database when it has other privileges
// there: the grants of a user that has the right ones are left alone, so
// its sessions never meet a moment without them.
func (s *Server) grant(ctx context.Context, c Conn, g Grant) error {
	db := grantDatabase(g.Database)
	row, err := c.QueryRow(ctx, "SELECT * FROM mysql.db WHERE user = "+QuoteString(g.User)+" AND host = '%' AND db = "+QuoteString(db))
	if err != nil {
		return err
	}
	if heldAccess(row) == g.Access {
		return nil
	}
	account := Account(g.User, "%")
	var stmts []string
	if row != nil {
		stmts = append(stmts, fmt.Sprintf("REVOKE ALL PRIVILEGES ON %s.* FROM %s", QuoteIdent(db), account))
	}
	if g.Access != api.AccessNone {
		stmts = append(stmts, fmt.Sprintf("GRANT %s ON %s.* TO %s", grantStatement[g.Access], QuoteIdent(db), account))
	}
	return c.Exec(ctx, stmts...)
}

// grantDatabase is the database's name in a GRANT: '_' is a wildcard
// there, which would give the same privileges on every database whose
// name differs only in its place.
func grantDatabase(name string) string { return strings.ReplaceAll(name, "_", `\_`) }

// heldAccess is the level of access a mysql.db row gives (no row: none);
// privileges of no level are "custom", which no grant asks for.
func heldAccess(row map[string]string) api.Access {
	if row == nil {
		return api.AccessNone
	}
	var held, all []string
	for col, v := range row {
		if !strings.HasSuffix(col, "_priv") || col == "Grant_priv" {
			continue
		}
		all = append(all, col)
		if v == "Y" {
			held = append(held, col)
		}
	}
	sort.Strings(held)
	switch {
	case len(held) == 0:
		return api.AccessNone
	case len(held) == len(all):
		return api.AccessAll
	}
	for access, privs := range grantPrivileges {
		if slices.Equal(held, privs) {
			return access
		}
	}
	return "custom"
}

// dropRole ends the role's sessions and drops it.
func dropRole(ctx context.Context, c Conn, name string) error {
	rows, err := c.QueryRows(ctx, "SELECT id FROM information_schema.processlist WHERE user = "+QuoteString(name)+" AND id <> CONNECTION_ID()")
	if err != nil {
		return err
	}
	// Locked first, so no session starts between the kills and the drop.
	if err := c.Exec(ctx, "ALTER USER IF EXISTS "+Account(name, "%")+" ACCOUNT LOCK"); err != nil {
		return err
	}
	for _, row := range rows {
		// A session that ended on its own meanwhile is no error.
		if err := c.Exec(ctx, "KILL CONNECTION "+row["id"]); err != nil && !strings.Contains(err.Error(), "1094") {
			return err
		}
	}
	return c.Exec(ctx, "DROP USER IF EXISTS "+Account(name, "%"))
}
