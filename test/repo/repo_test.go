package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootIsTheMainModule(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	// This package's directory is test/repo under the root.
	wd, _ := os.Getwd()
	if want := filepath.Dir(filepath.Dir(wd)); root != want {
		t.Fatalf("Root() = %s, want %s", root, want)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "mydb-apiserver")); err != nil {
		t.Fatalf("the root has no cmd/mydb-apiserver: %v", err)
	}
}

func TestRootSkipsANestedModule(t *testing.T) {
	// From test/bench (a module of its own) the root is still the main one.
	root, _ := Root()
	t.Chdir(filepath.Join(root, "test", "bench"))
	got, err := Root()
	if err != nil || got != root {
		t.Fatalf("Root() from test/bench = %q, %v, want %s", got, err, root)
	}
}

func TestRootOutsideTheRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Root(); err == nil {
		t.Fatal("Root() outside the repository returned no error")
	}
}
