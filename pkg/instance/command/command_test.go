package command

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
