package main

import (
	"os"
	"strings"
	"testing"
)

// The test binary is a Go binary like the servers: its own functions are
// found, a renamed one is reported with its row.
func TestMissingFunctionsAreNamed(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	names, err := binaryFunctions(exe)
	if err != nil {
		t.Fatal(err)
	}
	// Under go test, package main is compiled with its import path.
	const present = "github.com/mydb-dev/mydb/test/bench.missingFunctions"
	if !names[present] {
		t.Fatalf("the test binary's own %s is not among its %d functions", present, len(names))
	}
	buckets := []cpuBucket{
		{"kept", []string{present}, false},
		{"renamed", []string{present, "k8s.io/apiserver/pkg/gone.Handler"}, false},
	}
	missing := missingFunctions(buckets, map[string]map[string]bool{"test": names})
	if len(missing) != 1 || !strings.Contains(missing[0], "k8s.io/apiserver/pkg/gone.Handler") || !strings.Contains(missing[0], `"renamed"`) {
		t.Errorf("missing %q, want the one gone function with its row", missing)
	}
}
