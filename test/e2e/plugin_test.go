//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

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
