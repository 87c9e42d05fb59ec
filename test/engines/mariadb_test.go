//go:build engines

package engines

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestMariaDB(t *testing.T) { runSuite(t, mariadbSpec()) }

func mariadbSpec() engineSpec {
	return engineSpec{
		name:       "mariadb",
		osUser:     "mysql",
		dataSubdir: "mariadb",
		ipPrefix:   "127.0.32.",
		holdCommits: func(n *node, d time.Duration) error {
			db, err := mariadbRoot(n)
			if err != nil {
				return err
			}
			defer db.Close()
			conn, err := db.Conn(context.Background())
			if err != nil {
				return err
			}
			defer conn.Close()
			for _, stmt := range []string{"FLUSH TABLES WITH READ LOCK", fmt.Sprintf("DO SLEEP(%g)", d.Seconds()), "UNLOCK TABLES"} {
				if _, err := conn.ExecContext(context.Background(), stmt); err != nil {
					return fmt.Errorf("%s: %w", stmt, err)
				}
			}
			return nil
		},
		sync: syncChecks{
			commitMark: func(ctx context.Context, conn *sql.Conn) (string, error) {
				var gtid string
				err := conn.QueryRowContext(ctx, "SELECT @@last_gtid").Scan(&gtid)
				return gtid, err
			},
			replicaHas: func(t *testing.T, r *node) func(string) (bool, error) {
				// As root over the replica's socket: SHOW SLAVE STATUS.
				db, err := mariadbRoot(r)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return func(gtid string) (bool, error) {
					io, err := gtidIOPos(db)
					if err != nil {
						return false, err
					}
					return gtidHeld(io, gtid), nil
				}
			},
		},
		openApp: openMySQLFamily,
		assertCleanStop: func(t *testing.T, n *node, logFrom int64) {
			t.Helper()
			if log := n.logSince(logFrom); !strings.Contains(log, "mariadbd: Shutdown complete") {
				t.Errorf("%s: no \"Shutdown complete\" in the log of the stop", n.name)
			}
		},
		assertAppConfined: func(t *testing.T, c *cluster, app *sql.DB) {
			assertMySQLFamilyAppConfined(t, c, app, map[string]uint16{
				"CREATE USER 'intruder'@'%'":                     1227, // ER_SPECIFIC_ACCESS_DENIED_ERROR
				"SELECT * FROM mysql.user":                       1142, // ER_TABLEACCESS_DENIED_ERROR
				"SET GLOBAL max_connections = 500":               1227,
				"SELECT 1 INTO OUTFILE '/tmp/mydb-intruder.txt'": 1227, // needs FILE
				"CREATE DATABASE other":                          1044, // ER_DBACCESS_DENIED_ERROR
				"GRANT ALL ON appdb.* TO 'intruder'@'%'":         1044,
			})
		},
		bulkLoad: []string{
			"CREATE TABLE bulk (id int PRIMARY KEY, v text)",
			"INSERT INTO bulk SELECT seq, repeat(md5(seq), 32) FROM seq_1_to_60000",
		},
		purgeHistory: func(t *testing.T, p *node) {
			t.Helper()
			// As root over the primary's socket (unix_socket authentication).
			db, err := mariadbRoot(p)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("FLUSH BINARY LOGS"); err != nil {
				t.Fatal(err)
			}
			var file, pos, doDB, ignoreDB sql.NullString
			if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
				t.Fatal(err)
			}
			// PURGE skips a file a connected replica still reads: retry
			// until only the new file is left.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := db.Exec("PURGE BINARY LOGS TO '" + file.String + "'"); err != nil {
					t.Fatal(err)
				}
				n := countRows(t, db, "SHOW BINARY LOGS")
				if n == 1 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d binary logs left after PURGE", n)
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		progress: func(p *api.Position) uint64 {
			if p == nil {
				return 0
			}
			// Sum of the sequence numbers over domains: "0-1-42,1-3-7".
			var sum uint64
			for _, g := range strings.Split(p.GTID, ",") {
				if f := strings.Split(strings.TrimSpace(g), "-"); len(f) == 3 {
					n, _ := strconv.ParseUint(f[2], 10, 64)
					sum += n
				}
			}
			return sum
		},
	}
}

// assertMySQLFamilyAppConfined: the application user owns its database and
// nothing else (each statement of refused fails with its error code), reads
// no file, holds no global privilege, and the administrators cannot log in
// over the network.
func assertMySQLFamilyAppConfined(t *testing.T, c *cluster, app *sql.DB, refused map[string]uint16) {
	t.Helper()
	mustExec(t, app, "CREATE TABLE app_owned (id int PRIMARY KEY)")
	mustExec(t, app, "INSERT INTO app_owned VALUES (1)")
	for stmt, code := range refused {
		if _, err := app.Exec(stmt); !isMyCode(err, code) {
			t.Errorf("as the application user, %q: want error %d, got %v", stmt, code, err)
		}
	}
	// Without FILE, LOAD_FILE returns NULL instead of the file.
	var content sql.NullString
	if err := app.QueryRow("SELECT LOAD_FILE('/etc/passwd')").Scan(&content); err != nil || content.Valid {
		t.Errorf("LOAD_FILE as the application user: %v, read %v", err, content.Valid)
	}
	var grants []string
	rows, err := app.Query("SHOW GRANTS")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var g string
		_ = rows.Scan(&g)
		grants = append(grants, g)
	}
	rows.Close()
	// Global privileges (SUPER, FILE, PROCESS, ...) would be grants
	// ON *.*: only USAGE (the right to log in) may be there.
	for _, g := range grants {
		if (strings.Contains(g, " ON *.* ") && !strings.HasPrefix(g, "GRANT USAGE ON *.*")) || strings.Contains(g, "GRANT OPTION") {
			t.Errorf("application user grant beyond its database: %s", g)
		}
	}
	if len(grants) != 2 {
		t.Errorf("application user grants: want USAGE and its database's, got %q", grants)
	}
	p := c.nodes[0]
	if err := p.openAs("app", "wrong-password").Ping(); !isMyCode(err, 1045) {
		t.Errorf("wrong password: want 1045, got %v", err)
	}
	for _, admin := range []string{"root", "mysql"} {
		if err := p.openAs(admin, c.secrets[instance.SecretSuperuserPassword]).Ping(); err == nil {
			t.Errorf("%s logged in over the network", admin)
		}
	}
}

// openMySQLFamily opens a pool over TCP with the MySQL protocol.
func openMySQLFamily(host string, port int, user, password, database string) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.DBName = user, password, database
	c.Net, c.Addr = "tcp", host+":"+strconv.Itoa(port)
	c.Timeout = 5 * time.Second
	return sql.Open("mysql", c.FormatDSN())
}

func isMyCode(err error, code uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == code
}

func countRows(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n
}

// gtidIOPos is the replica IO thread's Gtid_IO_Pos: the GTIDs it received
// into the relay log.
func gtidIOPos(db *sql.DB) (string, error) {
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	if !rows.Next() {
		return "", fmt.Errorf("SHOW SLAVE STATUS: no row (%v)", rows.Err())
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	for i, c := range cols {
		if c == "Gtid_IO_Pos" {
			return string(vals[i]), nil
		}
	}
	return "", fmt.Errorf("SHOW SLAVE STATUS has no Gtid_IO_Pos")
}

// gtidHeld tells whether the GTID list pos holds gtid (domain-server-seq):
// a sequence number at least gtid's in its domain.
func gtidHeld(pos, gtid string) bool {
	var d, s, n uint64
	if _, err := fmt.Sscanf(gtid, "%d-%d-%d", &d, &s, &n); err != nil {
		return false
	}
	for _, g := range strings.Split(pos, ",") {
		var pd, ps, pn uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(g), "%d-%d-%d", &pd, &ps, &pn); err == nil && pd == d && pn >= n {
			return true
		}
	}
	return false
}

// mariadbRoot is a pool as MariaDB's root on n, over its socket
// (unix_socket authentication).
func mariadbRoot(n *node) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", filepath.Join(n.runDir, "mariadbd.sock")
	return sql.Open("mysql", cfg.FormatDSN())
}
