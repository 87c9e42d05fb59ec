//go:build engines

// Package engines is the real-engine suite of mydb-instance: it runs the
// built binary against PostgreSQL and MariaDB as the packages' users, and
// against MySQL 9.7 from its engine image's root filesystem
// (imageroot_test.go), on loopback addresses, in temporary directories
// (make test-engines).
package engines

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

var (
	// root holds every directory the suite makes; it is traversable by the
	// engines' users, who own their instances' directories below it.
	root string
	// binary is the mydb-instance under test.
	binary string
	// imagesRoot holds the unpacked engine images (imageroot_test.go).
	imagesRoot string
)

// privateMounts is set in the environment of the suite re-run in a mount
// namespace of its own.
const privateMounts = "MYDB_ENGINES_PRIVATE_MOUNTS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(relayEnv); spec != "" {
		os.Exit(relayMain(spec))
	}
	if os.Getenv(privateMounts) == "" {
		os.Exit(rerunWithPrivateMounts())
	}
	os.Exit(run(m))
}

// rerunWithPrivateMounts runs this test binary again in a mount namespace
// of its own (the child's / made private by the runtime), so that the
// image roots' mounts are seen by nobody else and vanish with the suite
// however it ends.
func rerunWithPrivateMounts() int {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), privateMounts+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "the engine suite in a mount namespace of its own:", err)
		return 1
	}
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
	// Beside root, not in it: an image root has root mounted inside.
	if imagesRoot, err = os.MkdirTemp("", "mydb-engine-images-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(imagesRoot)
	defer unmountAll()
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
