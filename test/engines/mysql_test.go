//go:build engines

package engines

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// TestMySQL runs the suite on MySQL 9.7, from the root filesystem of the
// engine image the real node runs (Debian sid's mysql-server; this
// machine's Debian packages no MySQL).
func TestMySQL(t *testing.T) { runSuite(t, mysqlSpec()) }

func mysqlSpec() engineSpec {
	return engineSpec{
		name:       "mysql",
		osUser:     "mysql",
		image:      "mysql-9.7",
		dataSubdir: "mysql",
		ipPrefix:   "127.0.39.",
		holdCommits: func(n *node, d time.Duration) error {
			_, err := n.adminSQL(fmt.Sprintf("FLUSH TABLES WITH READ LOCK; DO SLEEP(%g); UNLOCK TABLES", d.Seconds()))
			return err
		},
		sync: syncChecks{
			// The only writer's commit is in gtid_executed right after it.
			commitMark: func(ctx context.Context, conn *sql.Conn) (string, error) {
				var gtids string
				err := conn.QueryRowContext(ctx, "SELECT @@global.gtid_executed").Scan(&gtids)
				return gtids, err
			},
			// Received (in the relay log) or applied: the transactions the
			// replica cloned are in gtid_executed only.
			replicaHas: func(t *testing.T, r *node) func(string) (bool, error) {
				return func(gtids string) (bool, error) {
					out, err := r.adminSQL(fmt.Sprintf("SELECT GTID_SUBSET(GTID_SUBTRACT('%s', @@global.gtid_executed), RECEIVED_TRANSACTION_SET) "+
						"FROM performance_schema.replication_connection_status", gtids))
					return out == "1", err
				}
			},
		},
		openApp: openMySQLFamily,
		assertCleanStop: func(t *testing.T, n *node, logFrom int64) {
			t.Helper()
			if log := n.logSince(logFrom); !strings.Contains(log, "mysqld: Shutdown complete") {
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
			"INSERT INTO bulk WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 60000) " +
				"SELECT /*+ SET_VAR(cte_max_recursion_depth = 60000) */ n, repeat(sha2(n, 256), 16) FROM seq",
		},
		purgeHistory: func(t *testing.T, p *node) {
			t.Helper()
			if _, err := p.adminSQL("FLUSH BINARY LOGS"); err != nil {
				t.Fatal(err)
			}
			status, err := p.adminSQL("SHOW BINARY LOG STATUS")
			if err != nil {
				t.Fatal(err)
			}
			file := strings.Fields(status)[0]
			// PURGE skips a file a connected replica still reads: retry
			// until only the new file is left.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := p.adminSQL("PURGE BINARY LOGS TO '" + file + "'"); err != nil {
					t.Fatal(err)
				}
				logs, err := p.adminSQL("SHOW BINARY LOGS")
				if err != nil {
					t.Fatal(err)
				}
				n := len(strings.Split(logs, "\n"))
				if n == 1 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d binary logs left after PURGE:\n%s", n, logs)
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		progress: func(p *api.Position) uint64 {
			if p == nil {
				return 0
			}
			return gtidSetSize(p.GTID)
		},
	}
}

// gtidSetSize counts the transactions of a MySQL GTID set
// ("uuid:1-42:50,uuid2:7").
func gtidSetSize(set string) uint64 {
	var n uint64
	for _, member := range strings.Split(set, ",") {
		parts := strings.Split(strings.TrimSpace(member), ":")
		for _, interval := range parts[min(1, len(parts)):] {
			lo, hi, found := strings.Cut(interval, "-")
			a, err1 := strconv.ParseUint(lo, 10, 64)
			b, err2 := strconv.ParseUint(hi, 10, 64)
			switch {
			case !found && err1 == nil:
				n++
			case err1 == nil && err2 == nil && b >= a:
				n += b - a + 1
			}
		}
	}
	return n
}

// adminSQL runs query as MySQL's root on n, over its socket with the
// image's own client as the engine's OS user (auth_socket admits only
// it), and returns the rows, tab-separated, without column names.
func (n *node) adminSQL(query string) (string, error) {
	cmd := n.c.image.command(exec.Command("/usr/bin/mysql", "--no-defaults", "--socket="+filepath.Join(n.runDir, "mysqld.sock"),
		"--user=root", "--batch", "--skip-column-names", "--execute="+query))
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("%s on %s: %v: %s", query, n.name, err, strings.TrimSpace(stderr))
	}
	return strings.TrimSpace(string(out)), nil
}
