package mydatabasebackup

import (
	"context"
	"fmt"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/registry/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

var columns = []metav1.TableColumnDefinition{
	common.NameColumn,
	{Name: "Database", Type: "string", Description: "The MyDatabase backed up."},
	{Name: "Status", Type: "string", Description: "Pending, Running, Succeeded or Failed."},
	{Name: "Started", Type: "string", Description: "How long ago the backup Job started."},
	{Name: "Completed", Type: "string", Description: "How long ago the backup finished."},
	common.AgeColumn,
	{Name: "Location", Type: "string", Priority: 1, Description: "Where the dump is."},
	{Name: "Message", Type: "string", Priority: 1, Description: "Why a backup failed."},
}

// tableConvertor prints backups for kubectl get.
type tableConvertor struct{}

func (tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return common.ConvertToTable(obj, tableOptions, columns, func(obj runtime.Object, age string) ([]interface{}, error) {
		b, ok := obj.(*example.MyDatabaseBackup)
		if !ok {
			return nil, fmt.Errorf("expected a MyDatabaseBackup, got %T", obj)
		}
		phase := string(b.Status.Phase)
		if phase == "" {
			phase = string(example.BackupPhasePending)
		}
		return []interface{}{b.Spec.DatabaseName, phase, since(b.Status.StartTime), since(b.Status.CompletionTime), age,
			orNone(b.Status.Location.URI()), orNone(b.Status.Message)}, nil
	})
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
