package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
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
	if _, err := client.MyDatabases(ns).Create(ctx, newMyDatabase("prod-mysql", withDestination), metav1.CreateOptions{}); err != nil {
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

// TestPluginSwitchover runs "kubectl mydb switchover": dry run, then for real.
func TestPluginSwitchover(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	db, err := dbs.Create(ctx, newMyDatabase("shop"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.Status.CurrentPrimary = "shop-0"
	db.Status.Instances = []examplev1.InstanceStatus{
		{Name: "shop-0", Address: "10.0.0.1", Role: examplev1.InstanceRolePrimary, Ready: true},
		{Name: "shop-1", Address: "10.0.0.2", Role: examplev1.InstanceRoleReplica, Ready: true},
	}
	if _, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, server.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(append(args, "--kubeconfig=/dev/null", "--server="+server.Config.Host, "--token="+server.Config.BearerToken,
			"--certificate-authority="+ca, "--tls-server-name="+server.Config.ServerName, "-n", ns))
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		err := cmd.ExecuteContext(ctx)
		return out.String() + errOut.String(), err
	}
	if out, err := run("switchover", "shop", "--to", "shop-1", "--dry-run"); err != nil || !strings.Contains(out, "from shop-0 to shop-1 (dry run)") {
		t.Fatalf("dry run: %v: %s", err, out)
	}
	if out, err := run("switchover", "shop", "--to", "shop-0"); err == nil {
		t.Fatalf("switchover to the primary: %s", out)
	}
	// --allow-write-loss forces only a failover the controller holds back.
	if out, err := run("switchover", "shop", "--to", "shop-1", "--allow-write-loss", "--dry-run"); err == nil || !strings.Contains(err.Error(), "no failover is held back") {
		t.Fatalf("--allow-write-loss with no failover held back: %v: %s", err, out)
	}
	if out, err := run("switchover", "shop"); err != nil || !strings.Contains(out, "from shop-0 to shop-1") {
		t.Fatalf("switchover: %v: %s", err, out)
	}
	got, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	if err != nil || got.Status.TargetPrimary != "shop-1" {
		t.Fatalf("%v, targetPrimary %q", err, got.Status.TargetPrimary)
	}
}
