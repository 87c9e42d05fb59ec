//go:build engines

package engines

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func postgresBackup() backupSpec {
	super := func(t *testing.T, n *node, database string) *sql.DB {
		t.Helper()
		return n.superuser(t, database)
	}
	return backupSpec{
		engine: postgresSpec(), srcPrefix: "127.0.33.", dstPrefix: "127.0.34.", onePrefix: "127.0.35.",
		load: func(t *testing.T, n *node) {
			app := super(t, n, "appdb")
			for _, stmt := range []string{
				`CREATE TABLE tricky (id int PRIMARY KEY, txt text, b bytea, ts timestamptz, j jsonb)`,
				`INSERT INTO tricky SELECT g, E'quote '' "dq" \\ backslash\nnewline\ttab \u00fcn\u00efc\u00f8d\u00e9 \U0001F418 #' || g,
					decode(md5(g::text) || '00ff', 'hex'),
					timestamptz '2024-03-10 01:30:00 America/New_York' + g * interval '37 minutes',
					jsonb_build_object('g', g, 's', E'line\nbreak "q" \\')
					FROM generate_series(1, 5000) g`,
				`INSERT INTO tricky VALUES
					(5001, '', '\x'::bytea, '2024-10-27 02:30:00 Europe/Berlin', 'null'),
					(5002, NULL, NULL, '1999-12-31 23:59:59.999999 Asia/Kathmandu', '{"\u00fc": "\u00e9", "n": [1, 2.5, null]}'),
					(5003, E'\\x00 is not NUL', '\x00'::bytea, '2038-01-19 03:14:08+00', '[]')`,
				`CREATE TABLE blobs (id int PRIMARY KEY, data bytea)`,
				// 21.4 MiB that does not compress.
				`INSERT INTO blobs SELECT 1, decode(string_agg(md5(g::text), '' ORDER BY g), 'hex') FROM generate_series(1, 1400000) g`,
				`SELECT lo_from_bytea(0, decode(string_agg(md5((g * 7)::text), '' ORDER BY g), 'hex')) FROM generate_series(1, 200000) g`,
				`SELECT lo_from_bytea(0, 'small large object')`,
				`CREATE DATABASE otherdb`,
			} {
				mustExec(t, app, stmt)
			}
			other := super(t, n, "otherdb")
			mustExec(t, other, `CREATE TABLE events (id bigserial PRIMARY KEY, payload json, at timestamptz)`)
			mustExec(t, other, `INSERT INTO events (payload, at) SELECT json_build_object('n', g, 'tags', json_build_array('a', E'b\'c')),
				timestamptz '2025-01-01 00:00:00 Australia/Lord_Howe' + g * interval '1 second' FROM generate_series(1, 3000) g`)
		},
		checksums: func(t *testing.T, n *node) map[string]string {
			out := map[string]string{}
			conn := mustConn(t, super(t, n, "appdb"))
			if _, err := conn.ExecContext(context.Background(), "SET TimeZone = 'UTC'"); err != nil {
				t.Fatal(err)
			}
			queryChecksums(t, conn, map[string]string{
				"appdb.tricky":        `SELECT count(*) || ':' || md5(string_agg(md5(t::text), '' ORDER BY id)) FROM tricky t`,
				"appdb.blobs":         `SELECT count(*) || ':' || sum(length(data)) || ':' || md5(string_agg(md5(data), '' ORDER BY id)) FROM blobs`,
				"appdb.large-objects": `SELECT count(*) || ':' || md5(string_agg(md5(lo_get(oid)), '' ORDER BY oid)) FROM pg_largeobject_metadata`,
			}, out)
			other := mustConn(t, super(t, n, "otherdb"))
			if _, err := other.ExecContext(context.Background(), "SET TimeZone = 'UTC'"); err != nil {
				t.Fatal(err)
			}
			queryChecksums(t, other, map[string]string{
				"otherdb.events": `SELECT count(*) || ':' || md5(string_agg(md5(e::text), '' ORDER BY id)) FROM events e`,
			}, out)
			return out
		},
		credentials: func(t *testing.T, n *node, src *cluster) {
			t.Helper()
			if err := n.openAs("app", n.c.secrets[instance.SecretPassword]).Ping(); err != nil {
				t.Errorf("app with the restored database's password: %v", err)
			}
			if err := n.openAs("app", src.secrets[instance.SecretPassword]).Ping(); !isPgCode(err, "28P01") {
				t.Errorf("app with the source's password: want 28P01, got %v", err)
			}
			// The superuser: never over the network (either password), and on
			// the socket as the engine's user.
			for _, s := range []*cluster{n.c, src} {
				if err := n.openAs("postgres", s.secrets[instance.SecretSuperuserPassword]).Ping(); !isPgCode(err, "28000") {
					t.Errorf("superuser over the network: want 28000, got %v", err)
				}
			}
			if err := n.superuser(t, "").Ping(); err != nil {
				t.Errorf("superuser on the restored instance's socket: %v", err)
			}
		},
	}
}

func mariadbBackup() backupSpec {
	root := func(t *testing.T, n *node) *sql.DB {
		t.Helper()
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net, cfg.Addr = "root", "unix", filepath.Join(n.runDir, "mariadbd.sock")
		// The seq_1_to_N tables need a database.
		cfg.DBName = "appdb"
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return backupSpec{
		engine: mariadbSpec(), srcPrefix: "127.0.36.", dstPrefix: "127.0.37.", onePrefix: "127.0.38.",
		load: func(t *testing.T, n *node) {
			// A 21 MiB value is more than the default max_allowed_packet.
			mustExec(t, root(t, n), "SET GLOBAL max_allowed_packet = 67108864")
			conn := mustConn(t, root(t, n))
			for _, stmt := range []string{
				`SET SESSION group_concat_max_len = 67108864`,
				`CREATE TABLE appdb.tricky (id INT PRIMARY KEY, txt TEXT, b BLOB, ts DATETIME(6), tz TIMESTAMP(6) NULL, j JSON)`,
				`SET time_zone = '+05:30'`,
				`INSERT INTO appdb.tricky SELECT seq, CONCAT('quote '' "dq" \\ backslash\nnewline\ttab ünïcødé 🐬 #', seq),
					UNHEX(CONCAT(MD5(seq), '00FF')), '2024-03-10 02:30:00' + INTERVAL seq * 37 MINUTE,
					'2024-03-31 01:30:00' + INTERVAL seq * 11 MINUTE, JSON_OBJECT('g', seq, 's', 'line\nbreak "q" \\')
					FROM seq_1_to_5000`,
				`SET time_zone = '-08:00'`,
				`INSERT INTO appdb.tricky VALUES (5001, '', '', '1000-01-01 00:00:00', '1970-01-01 00:00:01', 'null'),
					(5002, NULL, NULL, '9999-12-31 23:59:59.999999', '2038-01-18 19:14:07', '{"ü": "é", "n": [1, 2.5, null]}'),
					(5003, '\\0 is not NUL', X'00', '2024-10-27 02:30:00', '2024-10-27 02:30:00', '[]')`,
				`CREATE TABLE appdb.blobs (id INT PRIMARY KEY, data LONGBLOB)`,
				`INSERT INTO appdb.blobs SELECT 1, UNHEX(GROUP_CONCAT(MD5(seq) ORDER BY seq SEPARATOR '')) FROM seq_1_to_1400000`,
				`CREATE DATABASE otherdb`,
				`CREATE TABLE otherdb.events (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload JSON, at TIMESTAMP(3))`,
				`INSERT INTO otherdb.events (payload, at) SELECT JSON_OBJECT('n', seq, 'tags', JSON_ARRAY('a', 'b''c')),
					'2025-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_1_to_3000`,
			} {
				if _, err := conn.ExecContext(context.Background(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
		},
		checksums: func(t *testing.T, n *node) map[string]string {
			out := map[string]string{}
			conn := mustConn(t, root(t, n))
			for _, stmt := range []string{"SET SESSION group_concat_max_len = 67108864", "SET time_zone = '+00:00'"} {
				if _, err := conn.ExecContext(context.Background(), stmt); err != nil {
					t.Fatal(err)
				}
			}
			queryChecksums(t, conn, map[string]string{
				"appdb.tricky": `SELECT CONCAT(COUNT(*), ':', MD5(GROUP_CONCAT(MD5(CONCAT_WS('|', id, HEX(txt), HEX(b), ts, tz, j, ISNULL(txt)))
					ORDER BY id SEPARATOR ''))) FROM appdb.tricky`,
				"appdb.blobs": `SELECT CONCAT(COUNT(*), ':', SUM(LENGTH(data)), ':', MD5(GROUP_CONCAT(MD5(data) ORDER BY id SEPARATOR ''))) FROM appdb.blobs`,
				"otherdb.events": `SELECT CONCAT(COUNT(*), ':', MD5(GROUP_CONCAT(MD5(CONCAT_WS('|', id, payload, at)) ORDER BY id SEPARATOR '')))
					FROM otherdb.events`,
			}, out)
			return out
		},
		credentials: assertMySQLFamilyCredentials,
	}
}

// mysqlBackup loads and reads through the image's own client as root
// (adminSQL): one session per call, so its SET statements hold for what
// follows them. MySQL 9.7 has no MD5(): the digests are SHA2's.
func mysqlBackup() backupSpec {
	seq := func(n int) string {
		return fmt.Sprintf("WITH RECURSIVE seq (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM seq WHERE seq < %d) ", n)
	}
	return backupSpec{
		engine: mysqlSpec(), srcPrefix: "127.0.40.", dstPrefix: "127.0.41.", onePrefix: "127.0.42.",
		load: func(t *testing.T, n *node) {
			script := strings.Join([]string{
				`SET SESSION group_concat_max_len = 67108864`,
				`SET SESSION cte_max_recursion_depth = 1000000`,
				`CREATE TABLE appdb.tricky (id INT PRIMARY KEY, txt TEXT, b BLOB, ts DATETIME(6), tz TIMESTAMP(6) NULL, j JSON)`,
				`SET time_zone = '+05:30'`,
				`INSERT INTO appdb.tricky ` + seq(5000) + `SELECT seq, CONCAT('quote '' "dq" \\ backslash\nnewline\ttab ünïcødé 🐬 #', seq),
					UNHEX(CONCAT(SHA2(seq, 256), '00FF')), '2024-03-10 02:30:00' + INTERVAL seq * 37 MINUTE,
					'2024-03-31 01:30:00' + INTERVAL seq * 11 MINUTE, JSON_OBJECT('g', seq, 's', 'line\nbreak "q" \\')
					FROM seq`,
				`SET time_zone = '-08:00'`,
				`INSERT INTO appdb.tricky VALUES (5001, '', '', '1000-01-01 00:00:00', '1970-01-01 00:00:01', 'null'),
					(5002, NULL, NULL, '9999-12-31 23:59:59.999999', '2038-01-18 19:14:07', '{"ü": "é", "n": [1, 2.5, null]}'),
					(5003, '\\0 is not NUL', X'00', '2024-10-27 02:30:00', '2024-10-27 02:30:00', '[]')`,
				`CREATE TABLE appdb.blobs (id INT PRIMARY KEY, data LONGBLOB)`,
				// 21.4 MiB that does not compress.
				`INSERT INTO appdb.blobs ` + seq(700000) + `SELECT 1, UNHEX(GROUP_CONCAT(SHA2(seq, 256) ORDER BY seq SEPARATOR '')) FROM seq`,
				`CREATE DATABASE otherdb`,
				`CREATE TABLE otherdb.events (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload JSON, at TIMESTAMP(3))`,
				`INSERT INTO otherdb.events (payload, at) ` + seq(3000) + `SELECT JSON_OBJECT('n', seq, 'tags', JSON_ARRAY('a', 'b''c')),
					'2025-01-01 00:00:00' + INTERVAL seq SECOND FROM seq`,
			}, ";\n")
			if _, err := n.adminSQL(script); err != nil {
				t.Fatal(err)
			}
		},
		checksums: func(t *testing.T, n *node) map[string]string {
			out := map[string]string{}
			for table, query := range map[string]string{
				"appdb.tricky": `SELECT CONCAT(COUNT(*), ':', SHA2(GROUP_CONCAT(SHA2(CONCAT_WS('|', id, HEX(txt), HEX(b), ts, tz, j, ISNULL(txt)), 256)
					ORDER BY id SEPARATOR ''), 256)) FROM appdb.tricky`,
				"appdb.blobs": `SELECT CONCAT(COUNT(*), ':', SUM(LENGTH(data)), ':', SHA2(GROUP_CONCAT(SHA2(data, 256) ORDER BY id SEPARATOR ''), 256)) FROM appdb.blobs`,
				"otherdb.events": `SELECT CONCAT(COUNT(*), ':', SHA2(GROUP_CONCAT(SHA2(CONCAT_WS('|', id, payload, at), 256) ORDER BY id SEPARATOR ''), 256))
					FROM otherdb.events`,
			} {
				v, err := n.adminSQL("SET SESSION group_concat_max_len = 67108864; SET time_zone = '+00:00'; " + query)
				if err != nil {
					// A replica may not have the table yet: the comparison fails.
					v = "error: " + err.Error()
				}
				out[table] = v
			}
			return out
		},
		credentials: func(t *testing.T, n *node, src *cluster) {
			t.Helper()
			assertMySQLFamilyCredentials(t, n, src)
			// root is this instance's OS user's, by auth_socket.
			if _, err := n.adminSQL("SELECT 1"); err != nil {
				t.Errorf("root over the socket: %v", err)
			}
		},
	}
}

// assertMySQLFamilyCredentials: on n, restored from src's backup, the
// application and replication users have n's passwords, not src's.
func assertMySQLFamilyCredentials(t *testing.T, n *node, src *cluster) {
	t.Helper()
	if err := n.app().Ping(); err != nil {
		t.Errorf("app with the restored database's password: %v", err)
	}
	if err := n.openAs("app", src.secrets[instance.SecretPassword]).Ping(); !isMyCode(err, 1045) {
		t.Errorf("app with the source's password: want 1045, got %v", err)
	}
	// The replication user may log in (and then not use appdb: 1044);
	// with the source's password it may not (1045).
	if err := n.openAs(api.ReplicationUser, n.c.secrets[instance.SecretReplicationPassword]).Ping(); !isMyCode(err, 1044) {
		t.Errorf("replicator with the restored database's password: want 1044, got %v", err)
	}
	if err := n.openAs(api.ReplicationUser, src.secrets[instance.SecretReplicationPassword]).Ping(); !isMyCode(err, 1045) {
		t.Errorf("replicator with the source's password: want 1045, got %v", err)
	}
}
