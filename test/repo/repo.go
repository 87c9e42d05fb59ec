// Package repo finds the repository's root directory (where _output/ is) for
// tests and their helpers. go test runs a test in its package's directory, so
// the root is found by walking up from there; a source file's own path
// (runtime.Caller) is no help, since the Makefile builds with -trimpath so
// that tests, go vet and the binaries share one build cache.
package repo

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Module is the main module's path, as go.mod declares it.
const Module = "github.com/mydb-dev/mydb"

// Root returns the directory holding the main module's go.mod, the working
// directory or the nearest of its parents that does (test/bench has a
// go.mod of its own).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s in the working directory or above it", Module)
		}
		dir = parent
	}
}

// MustRoot is Root for package variables of tests, which cannot return an
// error: outside the repository nothing a test needs can be found anyway.
func MustRoot() string {
	root, err := Root()
	if err != nil {
		panic(err)
	}
	return root
}

func declaresModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if fields := strings.Fields(scanner.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == Module
		}
	}
	return false
}
