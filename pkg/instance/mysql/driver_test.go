package mysql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily/fakeconn"
	"github.com/mydb-dev/mydb/pkg/pki/pkitest"
)

// These tests need no server: the tools (mysqld --initialize-insecure,
// the temporary servers) and the admin connection are fakes that behave
// as the manual says, and the tests check what the driver runs and
// decides. The instance suite (test/engines) runs a real MySQL 9.7.

const (
	appPassword  = "app-pw-1"
	replPassword = "repl-pw-2"
)

// fakeTools plays mysqld: --initialize-insecure creates a data directory
// and, like the real one, refuses a directory that has files in it.
type fakeTools struct {
	t      *testing.T
	conn   *fakeconn.Conn
	runs   [][]string
	serves [][]string
}

func flag(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func (f *fakeTools) Run(_ context.Context, args ...string) error {
	f.runs = append(f.runs, args)
	dir := flag(args, "--datadir")
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return errors.New("--initialize specified but the data directory has files in it. Aborting")
	}
	if err := os.MkdirAll(filepath.Join(dir, "mysql"), 0o750); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ibdata1"), []byte("initialized"), 0o600)
}

func (f *fakeTools) Serve(ctx context.Context, args []string, fn func(context.Context, mysqlfamily.Conn) error) error {
	f.serves = append(f.serves, args)
	if _, err := os.Stat(filepath.Join(flag(args, "--datadir"), "ibdata1")); err != nil {
		return errors.New("mysqld: the data directory is not initialized")
	}
	return fn(ctx, f.conn)
}

func newTestDriver(t *testing.T) (*Driver, *fakeTools) {
	t.Helper()
	secrets := t.TempDir()
	for k, v := range map[string]string{
		instance.SecretUsername: "app", instance.SecretPassword: appPassword, instance.SecretDatabase: "shop",
		instance.SecretReplicationPassword: replPassword,
	} {
		if err := os.WriteFile(filepath.Join(secrets, k), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := testDatabase.WriteSecrets(secrets); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	identity, err := instance.NewIdentity(instance.Secrets{Dir: secrets}, instance.InstanceLeaf("db-1", "db", "ns", "10.0.0.8"), nil, log)
	if err != nil {
		t.Fatal(err)
	}
	d := New(instance.DriverConfig{
		Name: "db-1", DataRoot: t.TempDir(), RunDir: "/run/mydb", ListenHost: "10.0.0.8", Port: 3306, ServerID: 2,
		Secrets: instance.Secrets{Dir: secrets}, Identity: identity, TLS: instance.EngineTLSIn("/run/mydb"), Log: log,
	})
	conn := &fakeconn.Conn{}
	tools := &fakeTools{t: t, conn: conn}
	d.tools, d.osUser = tools, "mysql"
	d.Server.Open = func() (mysqlfamily.Conn, error) { return conn, nil }
	return d, tools
}

func noPasswordIn(t *testing.T, what string, args [][]string) {
	t.Helper()
	for _, a := range args {
		if s := strings.Join(a, " "); strings.Contains(s, appPassword) || strings.Contains(s, replPassword) {
			t.Errorf("a password on %s's command line: %s", what, s)
		}
	}
}

func TestBootstrap(t *testing.T) {
	d, tools := newTestDriver(t)
	// A volume's root is not empty: the data goes one level below.
	if err := os.Mkdir(filepath.Join(d.cfg.DataRoot, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	// An interrupted bootstrap left files, which --initialize would refuse.
	scratch := d.DataDir + ".bootstrap"
	if err := os.MkdirAll(scratch, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "ibdata1"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{{"--no-defaults", "--initialize-insecure", "--datadir=" + scratch, "--log-error-verbosity=2"}}, tools.runs); diff != "" {
		t.Errorf("initialize: %s", diff)
	}
	if len(tools.serves) != 1 || flag(tools.serves[0], "--datadir") != scratch || !contains(tools.serves[0], "--skip-networking") ||
		!contains(tools.serves[0], "--plugin-load-add=auth_socket.so") || contains(tools.serves[0], "--super-read-only=ON") {
		t.Errorf("the users' server: %v", tools.serves)
	}
	want := []string{
		"ALTER USER 'root'@'localhost' IDENTIFIED WITH auth_socket AS 'mysql'",
		"CREATE DATABASE IF NOT EXISTS `shop` CHARACTER SET utf8mb4",
		"CREATE USER 'app'@'%' IDENTIFIED WITH caching_sha2_password BY 'app-pw-1'",
		"GRANT ALL PRIVILEGES ON `shop`.* TO 'app'@'%'",
		"CREATE USER 'replicator'@'%' IDENTIFIED WITH caching_sha2_password BY 'repl-pw-2'",
		"GRANT REPLICATION SLAVE, BACKUP_ADMIN ON *.* TO 'replicator'@'%'",
		"GRANT SERVICE_CONNECTION_ADMIN ON *.* TO 'replicator'@'%'",
	}
	if diff := cmp.Diff(want, tools.conn.Executed()); diff != "" {
		t.Errorf("statements: %s", diff)
	}
	noPasswordIn(t, "mysqld", append(tools.runs, tools.serves...))
	if has, err := d.HasData(); !has || err != nil {
		t.Fatalf("HasData after bootstrap: %v, %v", has, err)
	}
	id, err := d.SystemID()
	if err != nil || len(id) != 16 {
		t.Errorf("system identifier %q, %v", id, err)
	}
	if _, err := os.Stat(filepath.Join(d.DataDir, "ibdata1")); err != nil {
		t.Errorf("the initialized files are not in the data directory: %v", err)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("the scratch directory is left: %v", err)
	}
	// Twice is a no-op.
	if err := d.Bootstrap(context.Background()); err != nil || len(tools.runs) != 1 {
		t.Errorf("a second bootstrap ran mysqld (%d runs, %v)", len(tools.runs), err)
	}
}

func TestBootstrapFailsWithoutMarker(t *testing.T) {
	d, tools := newTestDriver(t)
	tools.conn.Fail = func(s string) error {
		if strings.HasPrefix(s, "CREATE USER 'app'") {
			return errors.New("Error 1396: Operation CREATE USER failed")
		}
		return nil
	}
	if err := d.Bootstrap(context.Background()); err == nil || !strings.Contains(err.Error(), "bootstrap users") {
		t.Fatalf("err = %v", err)
	}
	if has, _ := d.HasData(); has {
		t.Error("a failed bootstrap left a complete data set")
	}
}

func TestBootstrapRefusesReservedAppUser(t *testing.T) {
	d, tools := newTestDriver(t)
	if err := os.WriteFile(filepath.Join(d.cfg.Secrets.Dir, instance.SecretUsername), []byte("mysql.sys"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Bootstrap(context.Background()); err == nil || len(tools.runs) != 0 {
		t.Errorf("a reserved application user was accepted (%v)", err)
	}
}

// testDatabase is the CA and issuer of the instances of these tests.
var testDatabase = pkitest.New()

// primaryStatus serves the primary manager's /v1/status, over TLS as the
// instance name.
func primaryStatus(t *testing.T, name, id string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathStatus {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(api.Status{Name: name, SystemIdentifier: id})
	}))
	srv.TLS = testDatabase.ServerTLS(name)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestClone(t *testing.T) {
	// The engine's port; and the admin interface, where replicas clone
	// while clients get a certificate of the user's own.
	for _, port := range []struct{ engine, admin, donor int }{{3306, 0, 3306}, {3306, 33062, 33062}} {
		t.Run(fmt.Sprintf("from port %d", port.donor), func(t *testing.T) { testClone(t, port.engine, port.admin, port.donor) })
	}
}

func testClone(t *testing.T, enginePort, adminPort, donorPort int) {
	d, tools := newTestDriver(t)
	// Old data (a former primary's) stays until the copy is complete.
	if err := d.Complete(mustDir(t, d.DataDir+".old-primary"), "sys-old", nil); err != nil {
		t.Fatal(err)
	}
	clone := d.DataDir + ".clone"
	tools.conn.OnExec = func(s string) {
		if strings.HasPrefix(s, "CLONE INSTANCE") {
			// The plugin creates the DATA DIRECTORY, which must not exist.
			if _, err := os.Stat(clone); err == nil {
				t.Errorf("the clone directory exists before CLONE")
			}
			_ = os.MkdirAll(filepath.Join(clone, "shop"), 0o750)
			_ = os.WriteFile(filepath.Join(clone, "ibdata1"), []byte("cloned"), 0o600)
		}
	}
	topo := instance.Topology{Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: enginePort, PrimaryAdminPort: adminPort,
		PrimaryStatusURL: primaryStatus(t, "db-0", "sys-primary")}
	if err := d.Clone(context.Background(), topo); err != nil {
		t.Fatal(err)
	}
	seed := d.DataDir + ".seed"
	if len(tools.runs) != 1 || flag(tools.runs[0], "--datadir") != seed || !contains(tools.runs[0], "--initialize-insecure") {
		t.Errorf("the recipient's throwaway data directory: %v", tools.runs)
	}
	if len(tools.serves) != 1 || flag(tools.serves[0], "--datadir") != seed || !contains(tools.serves[0], "--plugin-load-add=mysql_clone.so") {
		t.Errorf("the recipient server: %v", tools.serves)
	}
	// Over TLS, verified against the database's CA.
	want := []string{
		"SET GLOBAL clone_ssl_ca = '/run/mydb/tls/database-ca.crt'",
		fmt.Sprintf("SET GLOBAL clone_valid_donor_list = '10.0.0.5:%d'", donorPort),
		fmt.Sprintf("CLONE INSTANCE FROM 'replicator'@'10.0.0.5':%d IDENTIFIED BY 'repl-pw-2' DATA DIRECTORY = '%s' REQUIRE SSL", donorPort, clone),
	}
	if diff := cmp.Diff(want, tools.conn.Executed()); diff != "" {
		t.Errorf("statements: %s", diff)
	}
	noPasswordIn(t, "mysqld", append(tools.runs, tools.serves...))
	if id, _ := d.SystemID(); id != "sys-primary" {
		t.Errorf("system identifier %q, want the primary's", id)
	}
	if b, _ := os.ReadFile(filepath.Join(d.DataDir, "ibdata1")); string(b) != "cloned" {
		t.Errorf("the data directory holds %q", b)
	}
	for _, leftover := range []string{seed, clone} {
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", leftover, err)
		}
	}
}

func TestCloneFailureKeepsTheData(t *testing.T) {
	d, tools := newTestDriver(t)
	if err := d.Complete(mustDir(t, d.DataDir+".before"), "sys-primary", nil); err != nil {
		t.Fatal(err)
	}
	tools.conn.Fail = func(s string) error {
		if strings.HasPrefix(s, "CLONE INSTANCE") {
			return errors.New("Error 3862: Clone Donor Error: 1045 : Access denied for user 'replicator'")
		}
		return nil
	}
	topo := instance.Topology{Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306, PrimaryStatusURL: primaryStatus(t, "db-0", "sys-primary")}
	err := d.Clone(context.Background(), topo)
	if err == nil || strings.Contains(err.Error(), replPassword) {
		t.Fatalf("err = %v", err)
	}
	if has, _ := d.HasData(); !has {
		t.Error("a failed clone removed the data")
	}
	if _, err := os.Stat(d.DataDir + ".seed"); !os.IsNotExist(err) {
		t.Errorf("the throwaway data directory is left: %v", err)
	}
}

func TestCloneChecksThePrimary(t *testing.T) {
	d, tools := newTestDriver(t)
	for name, topo := range map[string]instance.Topology{
		"no status URL":    {Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306},
		"another instance": {Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306, PrimaryStatusURL: primaryStatus(t, "db-2", "sys-x")},
		"no data set":      {Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306, PrimaryStatusURL: primaryStatus(t, "db-0", "")},
	} {
		if err := d.Clone(context.Background(), topo); err == nil {
			t.Errorf("%s: cloned", name)
		}
	}
	if len(tools.runs)+len(tools.serves) != 0 {
		t.Errorf("mysqld ran before the primary was known: %v %v", tools.runs, tools.serves)
	}
}

func TestCommand(t *testing.T) {
	d, _ := newTestDriver(t)
	cmd, err := d.Command()
	if err != nil {
		t.Fatal(err)
	}
	args := cmd.Args[1:]
	if filepath.Base(cmd.Path) != "mysqld" || args[0] != "--no-defaults" || flag(args, "--datadir") != d.DataDir {
		t.Errorf("command %v", cmd.Args)
	}
	for _, want := range []string{
		"--server-id=2", "--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--log-bin=mydb-bin", "--skip-replica-start",
		"--super-read-only=ON", "--skip-name-resolve", "--bind-address=10.0.0.8", "--port=3306",
		"--socket=/run/mydb/mysqld.sock", "--mysqlx=OFF", "--log-error-verbosity=2",
		"--plugin-load-add=mysql_clone.so", "--plugin-load-add=auth_socket.so",
	} {
		if !contains(args, want) {
			t.Errorf("mysqld lacks %s: %v", want, args)
		}
	}
	for _, a := range args {
		// binlog_format is deprecated (ROW is the default); --log-error
		// would take the error log away from stderr, the pod's log.
		if strings.HasPrefix(a, "--binlog-format") || strings.HasPrefix(a, "--log-error=") || a == "--log-error" {
			t.Errorf("mysqld gets %s", a)
		}
	}
	env := strings.Join(cmd.Env, "\n")
	if !strings.Contains(env, "MYSQLD_PARENT_PID=") {
		t.Error("mysqld is not told that a supervisor restarts it (MYSQLD_PARENT_PID)")
	}
	noPasswordIn(t, "mysqld", [][]string{cmd.Args, cmd.Env})
	if !d.RestartRequested(RestartExitCode) || d.RestartRequested(1) || d.RestartRequested(0) {
		t.Error("only exit status 16 asks for a restart")
	}
}

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

func mustDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ibdata1"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSetSynchronous: the source statements run only when the server is
// not already as asked, both ways.
func TestSetSynchronous(t *testing.T) {
	for _, tc := range []struct {
		name          string
		on            bool
		enabled, sync string
		want          int
	}{
		{"off to on", true, "0", "0", 5},
		{"on stays on", true, "1", "1", 0},
		{"enabled with other settings, to on", true, "1", "0", 5},
		{"on to off", false, "1", "1", 1},
		{"enabled with other settings, to off", false, "1", "0", 1},
		{"off stays off", false, "0", "0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, tools := newTestDriver(t)
			tools.conn.Row = func(q string) map[string]string {
				return map[string]string{"enabled": tc.enabled, "sync": tc.sync, "sync_replicas": "1"}
			}
			if err := d.SetSynchronous(context.Background(), tc.on); err != nil {
				t.Fatal(err)
			}
			got := tools.conn.Executed()
			if len(got) != tc.want {
				t.Fatalf("ran %q, want %d statements", got, tc.want)
			}
			if tc.want > 0 && got[len(got)-1] != fmt.Sprintf("SET GLOBAL rpl_semi_sync_source_enabled = %s", map[bool]string{true: "ON", false: "OFF"}[tc.on]) {
				t.Errorf("last statement %q", got[len(got)-1])
			}
		})
	}
}
