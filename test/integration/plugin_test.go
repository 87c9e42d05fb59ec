package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/cmd/plugin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestPluginBackup runs "kubectl mydb backup" against the server: the
// plugin takes the backup through the clientset's Backup method.
func TestPluginBackup(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	client := newClient(t).ExampleV1()
	if _, err := client.MyDatabases(ns).Create(ctx, newMyDatabase("prod-mysql"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, server.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append(args, "--kubeconfig=/dev/null", "--server="+server.Config.Host, "--token="+server.Config.BearerToken,
			"--certificate-authority="+ca, "--tls-server-name="+server.Config.ServerName, "-n", ns))
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		err := cmd.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}

	out, errOut, err := run("backup", "prod-mysql", "--name", "by-plugin")
	if err != nil || strings.TrimSpace(out) != "mydatabasebackup.example.com/by-plugin created" {
		t.Fatalf("kubectl mydb backup: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	b, err := client.MyDatabaseBackups(ns).Get(ctx, "by-plugin", metav1.GetOptions{})
	if err != nil || b.Spec.DatabaseName != "prod-mysql" {
		t.Fatalf("the plugin's backup: %v %+v", err, b)
	}
	if _, _, err := run("backup", "missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("backup of a missing database: %v, want not found", err)
	}
}
