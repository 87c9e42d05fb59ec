//go:build engines

// Package engines is the real-engine suite of mydb-instance: it runs the
// built binary against PostgreSQL and MariaDB as the packages' users, on
// loopback addresses, in temporary directories (make test-engines).
package engines

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var (
	// root holds every directory the suite makes; it is traversable by the
	// engines' users, who own their instances' directories below it.
	root string
	// binary is the mydb-instance under test.
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "the engine suite runs as root: it starts the engines as their packages' users")
		return 1
	}
	var err error
	if root, err = os.MkdirTemp("", "mydb-engines-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("MYDB_ENGINES_KEEP") == "" {
		defer os.RemoveAll(root)
	} else {
		defer fmt.Println("kept", root)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary = filepath.Join(root, "mydb-instance")
	if src := os.Getenv("MYDB_INSTANCE_BIN"); src != "" {
		// The Makefile built it: copy it where the engines' users can run it.
		err = exec.Command("install", "-m", "0755", src, binary).Run()
	} else {
		cmd := exec.Command("go", "build", "-o", binary, "github.com/mydb-dev/mydb/cmd/mydb-instance")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		err = cmd.Run()
	}
	if err == nil {
		err = os.Chmod(binary, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mydb-instance binary:", err)
		return 1
	}
	code := m.Run()
	// Whatever a failed test left running under root dies here.
	killUnder(root)
	return code
}
