package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBackupAction(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	client := newClient(t).ExampleV1()
	if _, err := client.MyDatabases(ns).Create(ctx, newMyDatabase("prod-mysql"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	backup := func(t *testing.T, db, query, body string) (rawResult, examplev1.MyDatabaseBackup) {
		t.Helper()
		res := do(t, http.MethodPost, dbPath(ns, db, "backup")+query, "application/json", []byte(body))
		var b examplev1.MyDatabaseBackup
		if res.code < 300 {
			if err := json.Unmarshal(res.body, &b); err != nil {
				t.Fatal(err)
			}
		}
		return res, b
	}

	t.Run("empty body creates a named backup", func(t *testing.T) {
		res, b := backup(t, "prod-mysql", "", `{}`)
		if res.code != http.StatusCreated {
			t.Fatalf("%d %s", res.code, res.body)
		}
		if b.Kind != "MyDatabaseBackup" || b.Spec.DatabaseName != "prod-mysql" || len(b.Name) != len("prod-mysql-")+5 || b.Namespace != ns {
			t.Errorf("backup %+v", b)
		}
	})
	t.Run("name and labels from the body", func(t *testing.T) {
		res, b := backup(t, "prod-mysql", "", `{"apiVersion":"example.com/v1","kind":"MyDatabaseBackup","metadata":{"name":"before-upgrade","labels":{"why":"upgrade"}}}`)
		if res.code != http.StatusCreated || b.Name != "before-upgrade" || b.Labels["why"] != "upgrade" {
			t.Fatalf("%d %s", res.code, res.body)
		}
	})
	t.Run("status in the body is dropped", func(t *testing.T) {
		res, b := backup(t, "prod-mysql", "", `{"status":{"phase":"Succeeded"}}`)
		if res.code != http.StatusCreated || b.Status.Phase != "" {
			t.Fatalf("%d %s", res.code, res.body)
		}
	})
	t.Run("dry run stores nothing", func(t *testing.T) {
		res, _ := backup(t, "prod-mysql", "?dryRun=All", `{"metadata":{"name":"dry"}}`)
		if res.code != http.StatusCreated {
			t.Fatalf("%d %s", res.code, res.body)
		}
		if _, err := client.MyDatabaseBackups(ns).Get(ctx, "dry", metav1.GetOptions{}); err == nil {
			t.Error("a dry-run backup was stored")
		}
	})
	t.Run("missing database", func(t *testing.T) {
		if res, _ := backup(t, "nope", "", `{}`); res.code != http.StatusNotFound {
			t.Errorf("%d %s, want 404", res.code, res.body)
		}
	})
	t.Run("another database in the body", func(t *testing.T) {
		if res, _ := backup(t, "prod-mysql", "", `{"spec":{"databaseName":"other"}}`); res.code != http.StatusBadRequest {
			t.Errorf("%d %s, want 400", res.code, res.body)
		}
	})
	t.Run("invalid name", func(t *testing.T) {
		res, _ := backup(t, "prod-mysql", "", `{"metadata":{"name":"Not_Valid"}}`)
		if res.code != http.StatusUnprocessableEntity {
			t.Errorf("%d %s, want 422", res.code, res.body)
		}
	})
	t.Run("database being deleted", func(t *testing.T) {
		held := newMyDatabase("held")
		held.Finalizers = []string{"example.com/hold"}
		if _, err := client.MyDatabases(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.MyDatabases(ns).Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if res, _ := backup(t, "held", "", `{}`); res.code != http.StatusConflict {
			t.Errorf("%d %s, want 409", res.code, res.body)
		}
		if _, err := client.MyDatabases(ns).Patch(ctx, "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	list, err := client.MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.databaseName=prod-mysql"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("backups of prod-mysql: %d, want 3", len(list.Items))
	}
	res := do(t, http.MethodGet, "/apis/example.com/v1/namespaces/"+ns+"/mydatabasebackups", "", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(res.body, &table); err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			headers = append(headers, c.Name)
		}
	}
	if got := len(headers); got != 6 || headers[1] != "Database" || headers[2] != "Status" {
		t.Errorf("backup columns %v", headers)
	}
	// A backup's spec may not change.
	b := list.Items[0]
	b.Spec.DatabaseName = "other"
	if _, err := client.MyDatabaseBackups(ns).Update(ctx, &b, metav1.UpdateOptions{}); err == nil {
		t.Error("a backup's spec changed")
	}
}
