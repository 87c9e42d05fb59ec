//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubectlMydb runs "kubectl mydb ARGS" with the plugin that make e2e builds
// into _output/bin on PATH, as a user would.
func kubectlMydb(t *testing.T, args ...string) result {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot, "_output", "bin", "kubectl-mydb")); err != nil {
		t.Fatalf("no plugin binary (make e2e builds it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// kubectl takes no flags before a plugin's name; the plugin reads
	// the same --kubeconfig flag as kubectl.
	cmd := exec.CommandContext(ctx, kubectlBin, append(append([]string{"mydb"}, args...), "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(repoRoot, "_output", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("kubectl mydb %s", strings.Join(args, " "))
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func TestKubectlPlugin(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")

	// Backing up, listing and restoring with the plugin run on real
	// engines in TestBackupAndRestore; the seed has no destination.
	r := kubectlMydb(t, "backup", "prod-mysql", "-n", ns, "--name", "by-plugin", "--wait", "3m")
	if r.err == nil || !strings.Contains(r.stderr, "spec.backup.destination") {
		t.Fatalf("backup of a database without a destination:\n%s", r)
	}
	r = kubectlMydb(t, "backups", "prod-mysql", "-n", ns)
	if r.err != nil || !strings.Contains(r.stdout, "NAME") || strings.Contains(r.stdout, "by-plugin") {
		t.Errorf("backups:\n%s", r)
	}
	if r := kubectlMydb(t, "restore", "by-plugin", "--to", "copy", "-n", ns); r.err == nil || !strings.Contains(r.stderr, "not found") {
		t.Errorf("restore from a missing backup:\n%s", r)
	}
	r = kubectlMydb(t, "status", "prod-mysql", "-n", ns)
	if r.err != nil || !strings.Contains(r.stdout, "Engine:     mysql 9.7") {
		t.Errorf("status:\n%s", r)
	}
	if r := kubectlMydb(t, "backup", "missing", "-n", ns); r.err == nil || !strings.Contains(r.stderr, "not found") {
		t.Errorf("backup of a missing database:\n%s", r)
	}
}
