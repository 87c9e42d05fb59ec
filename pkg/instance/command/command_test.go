package command

import (
	"bytes"
	"fmt"
	"os"
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
