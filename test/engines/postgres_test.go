//go:build engines

package engines

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

const pgBin = "/usr/lib/postgresql/15/bin"

func TestPostgres(t *testing.T) { runSuite(t, postgresSpec()) }

func postgresSpec() engineSpec {
	return engineSpec{
		name:       "postgres",
		osUser:     "postgres",
		binDir:     pgBin,
		dataSubdir: "pgdata",
		ipPrefix:   "127.0.31.",
		sync: syncChecks{
			commitMark: func(ctx context.Context, conn *sql.Conn) (string, error) {
				var lsn string
				err := conn.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn)
				return lsn, err
			},
			// The commit record follows the transaction's last record,
			// 34 bytes long: a replica that holds the commit has received
			// at least the insert position before COMMIT plus 34, whatever
			// other sessions (autovacuum) wrote meanwhile; one short of it
			// lacks the commit.
			markedCommit: func(ctx context.Context, conn *sql.Conn, stmt string) (string, error) {
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					return "", err
				}
				defer tx.Rollback()
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return "", err
				}
				var lsn string
				if err := tx.QueryRowContext(ctx, "SELECT (pg_current_wal_insert_lsn() + 34)::text").Scan(&lsn); err != nil {
					return "", err
				}
				return lsn, tx.Commit()
			},
			replicaHas: func(t *testing.T, r *node) func(string) (bool, error) {
				db := r.app()
				return func(lsn string) (bool, error) {
					var ok sql.NullBool
					err := db.QueryRow("SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn", lsn).Scan(&ok)
					return ok.Valid && ok.Bool, err
				}
			},
		},
		openApp: func(host string, port int, user, password, database string) (*sql.DB, error) {
			return sql.Open("pgx", fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=disable connect_timeout=5",
				host, port, user, password, database))
		},
		assertCleanStop: func(t *testing.T, n *node, _ int64) {
			t.Helper()
			out, err := exec.Command(filepath.Join(pgBin, "pg_controldata"), "-D", filepath.Join(n.dataRoot, "pgdata")).Output()
			if err != nil {
				t.Fatalf("pg_controldata: %v", err)
			}
			// "shut down" on a primary, "shut down in recovery" on a
			// standby: either way the next start needs no crash recovery.
			if !strings.Contains(string(out), "Database cluster state:               shut down") {
				t.Errorf("%s: pg_controldata after SIGTERM:\n%s", n.name, grepLine(string(out), "cluster state"))
			}
		},
		assertAppConfined: func(t *testing.T, c *cluster, app *sql.DB) {
			mustExec(t, app, "CREATE TABLE app_owned (id int PRIMARY KEY)")
			mustExec(t, app, "INSERT INTO app_owned VALUES (1)")
			for _, stmt := range []string{
				"CREATE ROLE intruder",
				"SELECT rolpassword FROM pg_authid",
				"COPY (SELECT 1) TO PROGRAM 'true'",
				"ALTER SYSTEM SET work_mem = '64MB'",
				"CREATE DATABASE other",
				"SELECT pg_read_file('postgresql.conf')",
			} {
				if _, err := app.Exec(stmt); !isPgCode(err, "42501") {
					t.Errorf("as the application user, %q: want permission denied (42501), got %v", stmt, err)
				}
			}
			var super, createRole, repl bool
			if err := app.QueryRow("SELECT rolsuper, rolcreaterole, rolreplication FROM pg_roles WHERE rolname = current_user").Scan(&super, &createRole, &repl); err != nil {
				t.Fatal(err)
			}
			if super || createRole || repl {
				t.Errorf("application role: superuser %v, createrole %v, replication %v", super, createRole, repl)
			}
			p := c.nodes[0]
			if err := p.openAs("app", "wrong-password").Ping(); !isPgCode(err, "28P01") {
				t.Errorf("wrong password: want 28P01, got %v", err)
			}
			if err := p.openAs(api.ReplicationUser, c.secrets[instance.SecretReplicationPassword]).Ping(); err == nil {
				t.Error("the replication user logged into the application database")
			}
			// The superuser never logs in over the network, not even with
			// its own password (pg_hba.conf rejects it: 28000); it is the
			// manager's OS user's, on the socket.
			for what, password := range map[string]string{"its own password": c.secrets[instance.SecretSuperuserPassword], "the app's": c.secrets[instance.SecretPassword]} {
				if err := p.openAs("postgres", password).Ping(); !isPgCode(err, "28000") {
					t.Errorf("superuser over the network with %s: want 28000 (rejected by pg_hba.conf), got %v", what, err)
				}
			}
			if err := p.superuser(t, "").Ping(); err != nil {
				t.Errorf("superuser on the socket as the engine's user: %v", err)
			}
		},
		bulkLoad: []string{
			"CREATE TABLE bulk (id int PRIMARY KEY, v text)",
			"INSERT INTO bulk SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, 60000) g",
		},
		purgeHistory: func(t *testing.T, p *node) {
			t.Helper()
			// As the superuser: let slots keep little WAL, write more than
			// that, and checkpoint until the stopped replica's slot is lost.
			su := p.superuser(t, "")
			for _, stmt := range []string{
				"ALTER SYSTEM SET max_slot_wal_keep_size = '16MB'",
				"ALTER SYSTEM SET wal_keep_size = 0",
				"SELECT pg_reload_conf()",
				"CREATE TABLE filler AS SELECT g, repeat('x', 1000) AS v FROM generate_series(1, 50000) g",
			} {
				mustExec(t, su, stmt)
			}
			slot := "mydb_" + strings.ReplaceAll(p.c.nodes[2].name, "-", "_")
			deadline := time.Now().Add(30 * time.Second)
			for {
				mustExec(t, su, "SELECT pg_switch_wal()")
				mustExec(t, su, "CHECKPOINT")
				var status sql.NullString
				if err := su.QueryRow("SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&status); err != nil {
					t.Fatalf("slot %s: %v", slot, err)
				}
				if status.String == "lost" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("slot %s is %q, not lost", slot, status.String)
				}
				time.Sleep(100 * time.Millisecond)
			}
			for _, stmt := range []string{
				"DROP TABLE filler",
				"ALTER SYSTEM RESET max_slot_wal_keep_size",
				"ALTER SYSTEM RESET wal_keep_size",
				"SELECT pg_reload_conf()",
			} {
				mustExec(t, su, stmt)
			}
		},
		progress: func(p *api.Position) uint64 {
			if p == nil {
				return 0
			}
			hi, lo, ok := strings.Cut(p.LSN, "/")
			if !ok {
				return 0
			}
			h, _ := strconv.ParseUint(hi, 16, 32)
			l, _ := strconv.ParseUint(lo, 16, 32)
			return h<<32 | l
		},
	}
}

func isPgCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return "(no line with " + sub + ")"
}
