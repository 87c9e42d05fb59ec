package mydatabase

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/livelag"
	"github.com/mydb-dev/mydb/pkg/registry/common"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var columns = []metav1.TableColumnDefinition{
	common.NameColumn,
	{Name: "Engine", Type: "string", Description: "The database engine."},
	{Name: "Version", Type: "string", Description: "The engine's release line."},
	{Name: "Replicas", Type: "integer", Description: "The desired number of replicas."},
	{Name: "Ready", Type: "string", Description: "Ready replicas out of desired replicas."},
	{Name: "Up-to-date", Type: "integer", Description: "Replicas that run the current pod template: a rolling update replaces the primary's last."},
	{Name: "Primary", Type: "string", Description: "The instance that serves writes; during a switchover or failover, the one the role moves to after an arrow."},
	{Name: "Storage", Type: "string", Description: "The volume size of each replica."},
	{Name: "Status", Type: "string", Description: "The state the conditions describe."},
	common.AgeColumn,
	{Name: "Endpoint", Type: "string", Priority: 1, Description: "The host:port clients connect to."},
	{Name: "Storage Class", Type: "string", Priority: 1, Description: "The StorageClass of the volumes."},
	{Name: "Deletion Policy", Type: "string", Priority: 1, Description: "What happens to the volumes on delete."},
	{Name: "Recoverable To", Type: "string", Priority: 1, Description: "The latest point a restore may target, and whether the archive keeps up (spec.backup.pointInTimeRecovery)."},
	{Name: "Replica Lag", Type: "string", Priority: 1, Description: "How far each replica's applied data is behind the primary, as its manager says at the time of the read (? when it did not answer in time); never stored."},
}

// tableConvertor prints MyDatabases for kubectl get.
type tableConvertor struct {
	// lag reads the replicas' lag from their managers; nil until the
	// controllers are built (and without them), when the column says so.
	lag atomic.Pointer[livelag.Reader]
}

func (t *tableConvertor) ConvertToTable(ctx context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	lag := t.lag.Load()
	if lag != nil {
		switch o := obj.(type) {
		case *example.MyDatabase:
			lag.Prefetch(ctx, o)
		case *example.MyDatabaseList:
			dbs := make([]*example.MyDatabase, len(o.Items))
			for i := range o.Items {
				dbs[i] = &o.Items[i]
			}
			lag.Prefetch(ctx, dbs...)
		}
	}
	return common.ConvertToTable(obj, tableOptions, columns, func(obj runtime.Object, age string) ([]interface{}, error) {
		db, ok := obj.(*example.MyDatabase)
		if !ok {
			return nil, fmt.Errorf("expected a MyDatabase, got %T", obj)
		}
		storageClass := "<default>"
		if db.Spec.StorageClassName != nil {
			storageClass = *db.Spec.StorageClassName
		}
		endpoint := db.Status.Endpoint
		if endpoint == "" {
			endpoint = "<none>"
		}
		replicaLag := "<unknown>"
		if lag != nil {
			replicaLag = lag.Text(db)
		}
		return []interface{}{
			string(db.Spec.Engine),
			db.Spec.Version,
			int64(db.Spec.Replicas),
			fmt.Sprintf("%d/%d", db.Status.ReadyReplicas, db.Spec.Replicas),
			int64(db.Status.UpdatedReplicas),
			primary(db),
			db.Spec.StorageSize.String(),
			Phase(db),
			age,
			endpoint,
			storageClass,
			string(db.Spec.DeletionPolicy),
			recoverableTo(db),
			replicaLag,
		}, nil
	})
}

// Phase sums a MyDatabase's conditions up in one word for humans; clients
// should read the conditions themselves.
func Phase(db *example.MyDatabase) string {
	switch {
	case db.DeletionTimestamp != nil:
		return "Terminating"
	case meta.FindStatusCondition(db.Status.Conditions, example.ConditionHibernated) != nil:
		// Hibernated, or on the way in or out of it.
		return meta.FindStatusCondition(db.Status.Conditions, example.ConditionHibernated).Reason
	case meta.IsStatusConditionTrue(db.Status.Conditions, example.ConditionDegraded):
		return "Degraded"
	case meta.IsStatusConditionTrue(db.Status.Conditions, example.ConditionReady) && db.Status.ObservedGeneration == db.Generation:
		return "Ready"
	case meta.IsStatusConditionTrue(db.Status.Conditions, example.ConditionProgressing):
		return "Progressing"
	case meta.IsStatusConditionPresentAndEqual(db.Status.Conditions, example.ConditionReady, metav1.ConditionFalse) &&
		meta.IsStatusConditionPresentAndEqual(db.Status.Conditions, example.ConditionProgressing, metav1.ConditionFalse) &&
		db.Status.ObservedGeneration == db.Generation:
		// Rolled out, and the primary does not serve (yet).
		return "NotReady"
	default:
		return "Pending"
	}
}

// primary is the current primary, and the target of a move under way.
func primary(db *example.MyDatabase) string {
	out := db.Status.CurrentPrimary
	if out == "" {
		out = "<none>"
	}
	if t := db.Status.TargetPrimary; t != "" && t != db.Status.CurrentPrimary {
		out += "->" + t
	}
	return out
}

// recoverableTo is the end of the recoverability window, with the reason
// when the archive does not keep up.
func recoverableTo(db *example.MyDatabase) string {
	out := "<none>"
	if r := db.Status.Recoverability; r != nil && r.LastRecoverableTime != nil {
		out = r.LastRecoverableTime.UTC().Format(time.RFC3339)
	}
	if c := meta.FindStatusCondition(db.Status.Conditions, example.ConditionContinuousArchiving); c != nil && c.Status != metav1.ConditionTrue {
		out += " (" + c.Reason + ")"
	}
	return out
}
