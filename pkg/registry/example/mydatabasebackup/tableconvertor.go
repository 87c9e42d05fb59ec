package mydatabasebackup

import (
	"context"
	"fmt"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"k8s.io/apimachinery/pkg/api/meta"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Database", Type: "string", Description: "The MyDatabase backed up."},
	{Name: "Status", Type: "string", Description: "Pending, Running, Succeeded or Failed."},
	{Name: "Started", Type: "string", Description: "How long ago the backup Job started."},
	{Name: "Completed", Type: "string", Description: "How long ago the backup finished."},
	{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "Location", Type: "string", Priority: 1, Description: "Where the dump is."},
	{Name: "Message", Type: "string", Priority: 1, Description: "Why a backup failed."},
}

// tableConvertor prints backups for kubectl get.
type tableConvertor struct{}

func (tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = columns
	}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	var err error
	table.Rows, err = metatable.MetaToTableRow(obj, func(obj runtime.Object, _ metav1.Object, name, age string) ([]interface{}, error) {
		b, ok := obj.(*example.MyDatabaseBackup)
		if !ok {
			return nil, fmt.Errorf("expected a MyDatabaseBackup, got %T", obj)
		}
		phase := string(b.Status.Phase)
		if phase == "" {
			phase = string(example.BackupPhasePending)
		}
		return []interface{}{name, b.Spec.DatabaseName, phase, since(b.Status.StartTime), since(b.Status.CompletionTime), age,
			orNone(b.Status.Location), orNone(b.Status.Message)}, nil
	})
	return table, err
}

func since(t *metav1.Time) string {
	if t == nil {
		return "<none>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
