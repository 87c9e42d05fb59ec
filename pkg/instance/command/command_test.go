package command

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
)

func TestServerIDFromName(t *testing.T) {
	for name, want := range map[string]uint32{"db-0": 1, "db-1": 2, "shop-db-41": 42} {
		if got := ServerIDFromName(name); got != want {
			t.Errorf("ServerIDFromName(%q) = %d, want %d", name, got, want)
		}
	}
	a, b := ServerIDFromName("alpha"), ServerIDFromName("beta")
	if a == b || a < 1<<31 || b < 1<<31 || a == 0 {
		t.Errorf("names without an ordinal: %d, %d", a, b)
	}
}

func TestValidate(t *testing.T) {
	o := &Options{StopTimeout: 1}
	if err := o.validate(); err == nil {
		t.Fatal("empty options validated")
	}
	base := func(mod func(*Options)) *Options {
		o := &Options{Engine: "postgres", Name: "db-0", DataRoot: "/d", RunDir: "/r", ListenHost: "127.0.0.1", SecretsDir: "/s", StopTimeout: 1,
			CertificateLifetime: MinCertificateLifetime}
		mod(o)
		return o
	}
	for name, tc := range map[string]struct {
		mod  func(*Options)
		want string
	}{
		"a topology file":              {mod: func(o *Options) { o.TopologyFile = "/t.json" }},
		"a database":                   {mod: func(o *Options) { o.Database, o.Namespace = "db", "team-a" }},
		"no topology at all":           {mod: func(*Options) {}, want: "--database (with --namespace) or --topology-file is required"},
		"both":                         {mod: func(o *Options) { o.TopologyFile, o.Database, o.Namespace = "/t.json", "db", "team-a" }, want: "exclusive"},
		"a database without namespace": {mod: func(o *Options) { o.Database = "db" }, want: "--namespace is required"},
		"a restore":                    {mod: func(o *Options) { o.TopologyFile, o.Restore = "/t.json", true }},
		"a mysql restore":              {mod: func(o *Options) { o.TopologyFile, o.Restore, o.Engine = "/t.json", true, "mysql" }},
		"a WAL archive": {mod: func(o *Options) {
			o.TopologyFile, o.ArchiveWAL, o.ArchiveTimeout, o.ArchiveParallelism = "/t.json", true, time.Minute, 4
		}},
		"no upload at a time": {mod: func(o *Options) { o.TopologyFile, o.ArchiveWAL, o.ArchiveTimeout = "/t.json", true, time.Minute },
			want: "--archive-parallel must be between 1 and 64"},
		"a mariadb binary log archive": {mod: func(o *Options) {
			o.TopologyFile, o.ArchiveWAL, o.ArchiveTimeout, o.ArchiveParallelism, o.Engine = "/t.json", true, time.Minute, 1, "mariadb"
		}},
		"a mysql binary log archive": {mod: func(o *Options) {
			o.TopologyFile, o.ArchiveWAL, o.ArchiveTimeout, o.ArchiveParallelism, o.Engine = "/t.json", true, time.Minute, 1, "mysql"
		}},
		"an archive timeout of 10ms": {mod: func(o *Options) {
			o.TopologyFile, o.ArchiveWAL, o.ArchiveTimeout = "/t.json", true, 10*time.Millisecond
		},
			want: "--archive-timeout must be at least 1s"},
		"certificates of a minute": {mod: func(o *Options) { o.TopologyFile, o.CertificateLifetime = "/t.json", time.Minute },
			want: "--certificate-lifetime must be at least 3m0s"},
	} {
		err := base(tc.mod).validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func TestCopySelf(t *testing.T) {
	dir := t.TempDir()
	if err := copySelf(dir); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(filepath.Join(dir, "mydb-instance"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy differs from the executable (%v)", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "mydb-instance")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "mydb-instance.tmp")); err == nil {
		t.Error("the temporary file was left")
	}
}

func TestNewDriver(t *testing.T) {
	for name, want := range map[string]struct {
		typ  string
		port int
	}{"postgres": {"*postgres.Driver", 5432}, "mariadb": {"*mariadb.Driver", 3306}, "mysql": {"*mysql.Driver", 3306}} {
		cfg := instance.DriverConfig{DataRoot: t.TempDir(), RunDir: t.TempDir()}
		driver, err := newDriver(name, &cfg)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := fmt.Sprintf("%T", driver); got != want.typ || cfg.Port != want.port {
			t.Errorf("%s: %s on port %d, want %s on %d", name, got, cfg.Port, want.typ, want.port)
		}
	}
	cfg := instance.DriverConfig{Port: 3307}
	if _, err := newDriver("mysql", &cfg); err != nil || cfg.Port != 3307 {
		t.Errorf("an explicit port: %d, %v", cfg.Port, err)
	}
	if _, err := newDriver("oracle", &instance.DriverConfig{}); err == nil {
		t.Error("a driver of an unknown engine was built")
	}
}

// The restore_command moves a spooled segment into place itself, and asks
// the manager (here: a command that writes the file) for anything else;
// a failed fetch is the command's failure.
func TestRestoreCommandTakesASpooledSegmentFirst(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool it's")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spool, "000000010000000000000002"), []byte("spooled"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name, fetch string) (string, error) {
		line := strings.ReplaceAll(strings.ReplaceAll(restoreCommand(spool, fetch), "%f", name), "%p", "RECOVERYXLOG")
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return string(out), err
		}
		b, err := os.ReadFile(filepath.Join(dir, "RECOVERYXLOG"))
		return string(b), err
	}
	if got, err := run("000000010000000000000002", "exit 126"); err != nil || got != "spooled" {
		t.Errorf("a spooled segment: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(spool, "000000010000000000000002")); !os.IsNotExist(err) {
		t.Errorf("the spooled segment is still there: %v", err)
	}
	if got, err := run("000000010000000000000003", "echo fetched > %p"); err != nil || got != "fetched\n" {
		t.Errorf("a segment not spooled: %q, %v", got, err)
	}
	if _, err := run("000000010000000000000004", "exit 126"); err == nil {
		t.Error("a failed fetch succeeded")
	}
	// What the manager found missing is "not archived" (exit 1, not the
	// fetch's 126), without asking it.
	if err := os.WriteFile(filepath.Join(spool, "000000010000000000000005"+instance.WALAbsentSuffix), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if _, err := run("000000010000000000000005", "exit 126"); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("a segment the archive lacks: %v, want exit status 1", err)
	}
}
