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
	{Name: "Instance", Type: "string", Description: "The instance backed up, and its role then."},
	{Name: "Size", Type: "string", Description: "The dump's size (while running: how much is streamed so far)."},
	{Name: "SHA256", Type: "string", Description: "The beginning of the dump's SHA-256; -o wide shows all of it."},
	{Name: "Duration", Type: "string", Description: "How long the backup took, or has been running."},
	common.AgeColumn,
	{Name: "Target", Type: "string", Priority: 1, Description: "The instance asked for: Primary or PreferReplica."},
	{Name: "Checksum", Type: "string", Priority: 1, Description: "The dump's SHA-256."},
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
		s := b.Status
		phase := string(s.Phase)
		if phase == "" {
			phase = string(example.BackupPhasePending)
		}
		instance := s.Instance
		if instance != "" && s.Role != "" {
			instance += " (" + string(s.Role) + ")"
		}
		size := s.SizeBytes
		if s.Phase == example.BackupPhaseRunning {
			size = s.Bytes
		}
		sizeText := ""
		if size > 0 || s.Phase == example.BackupPhaseSucceeded {
			sizeText = HumanBytes(size)
		}
		short := s.Checksum
		if len(short) > 12 {
			short = short[:12]
		}
		return []interface{}{b.Spec.DatabaseName, phase, orNone(instance), orNone(sizeText), orNone(short), took(s.StartTime, s.CompletionTime), age,
			orNone(string(b.Spec.Target)), orNone(s.Checksum), orNone(s.Location.URI()), orNone(s.Message)}, nil
	})
}

// HumanBytes writes a size in binary units, as "1.5GiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// took is how long a backup ran: to its completion, or until now.
func took(start, end *metav1.Time) string {
	if start == nil {
		return "<none>"
	}
	until := time.Now()
	if end != nil {
		until = end.Time
	}
	d := until.Sub(start.Time)
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return duration.HumanDuration(d)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
