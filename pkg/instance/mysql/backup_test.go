package mysql

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mydb-dev/mydb/pkg/instance/datatar"
)

// copyStream is a backup stream of a data directory holding ibdata1.
func copyStream(t *testing.T) []byte {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "ibdata1"), []byte("cloned"), 0o640); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := datatar.Write(&b, src); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A restore loads the grant tables a server without grant checks skipped,
// gives root to this manager's OS user and the Secret's passwords to the
// users, checks the database is there, forgets the source's replication,
// and only then puts the data in place, with a system identifier of its
// own; no password is on a command line.
func TestRestore(t *testing.T) {
	d, tools := newTestDriver(t)
	if err := d.Restore(t.Context(), bytes.NewReader(copyStream(t)), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"FLUSH PRIVILEGES",
		"ALTER USER 'root'@'localhost' IDENTIFIED WITH auth_socket AS 'mysql'",
		"ALTER USER 'app'@'%' IDENTIFIED WITH caching_sha2_password BY 'app-pw-1'",
		"ALTER USER 'replicator'@'%' IDENTIFIED WITH caching_sha2_password BY 'repl-pw-2'",
		"GRANT SERVICE_CONNECTION_ADMIN ON *.* TO 'replicator'@'%'",
		"USE `shop`",
		"RESET REPLICA ALL",
	}
	if diff := cmp.Diff(want, tools.conn.Executed()); diff != "" {
		t.Errorf("statements (-want +got):\n%s", diff)
	}
	if len(tools.serves) != 1 || !slices.Contains(tools.serves[0], "--skip-grant-tables") || !slices.Contains(tools.serves[0], "--skip-networking") ||
		flag(tools.serves[0], "--datadir") != d.DataDir+".restore" {
		t.Errorf("the server that set the credentials ran with %q", tools.serves)
	}
	noPasswordIn(t, "the restore's server", tools.serves)
	if has, err := d.HasData(); !has || err != nil {
		t.Fatalf("no data in place after the restore: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(d.DataDir, "ibdata1")); err != nil || string(b) != "cloned" {
		t.Errorf("the data in place: %q, %v", b, err)
	}
	if _, err := os.Stat(d.restoreDir()); !os.IsNotExist(err) {
		t.Errorf("the scratch directory is still there: %v", err)
	}
}

// A stream its checksum refuses, or credentials the server cannot set,
// leave no data and no scratch directory.
func TestRestoreFailuresLeaveNoData(t *testing.T) {
	for name, tc := range map[string]struct {
		verify func() error
		fail   func(string) error
		want   string
	}{
		"checksum mismatch": {verify: func() error { return errors.New("checksum mismatch") }, want: "checksum mismatch"},
		"no database": {verify: func() error { return nil }, want: "Unknown database",
			fail: func(stmt string) error {
				if strings.HasPrefix(stmt, "USE ") {
					return errors.New("Error 1049: Unknown database 'shop'")
				}
				return nil
			}},
	} {
		t.Run(name, func(t *testing.T) {
			d, tools := newTestDriver(t)
			tools.conn.Fail = tc.fail
			err := d.Restore(t.Context(), bytes.NewReader(copyStream(t)), tc.verify)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want %q", err, tc.want)
			}
			if has, _ := d.HasData(); has {
				t.Error("a failed restore left data in place")
			}
			if _, err := os.Stat(d.restoreDir()); !os.IsNotExist(err) {
				t.Errorf("a failed restore left its scratch directory: %v", err)
			}
		})
	}
}
