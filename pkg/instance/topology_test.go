package instance

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFileSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topology.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := FileSource{Path: path, Interval: 10 * time.Millisecond}.Watch(ctx)

	next := func() (Topology, bool) {
		select {
		case tp := <-ch:
			return tp, true
		case <-time.After(300 * time.Millisecond):
			return Topology{}, false
		}
	}
	if _, ok := next(); ok {
		t.Fatal("a topology from a file that does not exist")
	}
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"primary":"db-0","primaryHost":"10.0.0.1","primaryPort":5432,"primaryStatusURL":"http://10.0.0.1:8000"}`)
	if tp, ok := next(); !ok || tp.Primary != "db-0" || tp.PrimaryPort != 5432 || tp.PrimaryStatusURL != "http://10.0.0.1:8000" {
		t.Fatalf("first topology: %+v %v", tp, ok)
	}
	if _, ok := next(); ok {
		t.Fatal("an unchanged file sent again")
	}
	write(`{"primary":`)
	write(`{"primary":"db-1"}`) // no host: invalid
	if tp, ok := next(); ok {
		t.Fatalf("an invalid topology was sent: %+v", tp)
	}
	write(`{"primary":"db-1","primaryHost":"10.0.0.2","primaryPort":5432}`)
	if tp, ok := next(); !ok || tp.Primary != "db-1" {
		t.Fatalf("changed topology: %+v %v", tp, ok)
	}
	cancel()
	for range ch { //nolint:revive // drain until closed
	}
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "password"), []byte("s3cret\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600)
	s := Secrets{Dir: dir}
	if v, err := s.Get("password"); err != nil || v != "s3cret" {
		t.Errorf("Get: %q, %v", v, err)
	}
	if _, err := s.Get("empty"); err == nil {
		t.Error("an empty secret is no password")
	}
	if _, err := s.Get("missing"); err == nil {
		t.Error("a missing secret")
	}
}

func TestCleanEnv(t *testing.T) {
	t.Setenv("PGPASSWORD", "x")
	t.Setenv("MYDB_REPLICATION_PASSWORD", "x")
	t.Setenv("MYDB_KEEP", "y")
	env := CleanEnv()
	var kept bool
	for _, kv := range env {
		if kv == "PGPASSWORD=x" || kv == "MYDB_REPLICATION_PASSWORD=x" {
			t.Errorf("%s reached a child's environment", kv)
		}
		kept = kept || kv == "MYDB_KEEP=y"
	}
	if !kept {
		t.Error("an ordinary variable was dropped")
	}
}
