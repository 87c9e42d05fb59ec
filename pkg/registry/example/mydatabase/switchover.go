package mydatabase

import (
	"context"
	"fmt"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/clock"
)

// SwitchoverREST is the storage of mydatabases/switchover: a POST there
// records the decision to move the primary role, status.targetPrimary, and
// the controller carries it out (docs/replication.md). RBAC on the create
// verb of mydatabases/switchover is all it takes, and all it grants.
type SwitchoverREST struct {
	// status is the /status store: the decision is a status write, checked
	// and made against the stored object in one compare-and-swap, so two
	// requests (or a request and a failover) can never both win.
	status *genericregistry.Store
	clock  clock.PassiveClock
}

var _ rest.NamedCreater = &SwitchoverREST{}

// New returns an empty switchover request.
func (r *SwitchoverREST) New() runtime.Object { return &example.MyDatabaseSwitchover{} }

// Destroy does nothing: the store belongs to REST.
func (r *SwitchoverREST) Destroy() {}

var switchoverKind = example.Kind("MyDatabaseSwitchover")

// Create starts a switchover of the MyDatabase called name: 409 when one
// (or a failover) is under way, 422 when the target is not a ready replica.
// With dryRun it checks everything and writes nothing.
func (r *SwitchoverREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*example.MyDatabaseSwitchover)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a MyDatabaseSwitchover, got %T", obj))
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	now := metav1.NewMicroTime(r.clock.Now())
	answer := &example.MyDatabaseSwitchover{}
	// The transform runs on the stored object inside the store's
	// compare-and-swap (with no object of its own, it starts from nil).
	update := rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, oldObj runtime.Object) (runtime.Object, error) {
		db := oldObj.(*example.MyDatabase).DeepCopy()
		check, reason := checkSwitchoverRequest, example.TargetPrimaryReasonSwitchover
		if req.Spec.AllowWriteLoss {
			check, reason = checkForcedFailoverRequest, example.TargetPrimaryReasonForcedFailover
		}
		old, target, err := check(db, req.Spec.TargetInstance)
		if err != nil {
			return nil, err
		}
		db.Status.TargetPrimary = target
		db.Status.TargetPrimaryTime = &now
		db.Status.TargetPrimaryReason = reason
		answer.Status = example.MyDatabaseSwitchoverStatus{OldPrimary: old, NewPrimary: target, StartTime: &now}
		return db, nil
	})
	updateOptions := &metav1.UpdateOptions{DryRun: options.DryRun, FieldManager: options.FieldManager}
	updated, _, err := r.status.Update(ctx, name, update, rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, updateOptions)
	if err != nil {
		return nil, err
	}
	db := updated.(*example.MyDatabase)
	answer.Name, answer.Namespace = db.Name, db.Namespace
	answer.Spec.TargetInstance = answer.Status.NewPrimary
	return answer, nil
}

// checkSwitchoverRequest checks a switchover of db to target ("" for any ready
// replica) and returns the old and the new primary.
func checkSwitchoverRequest(db *example.MyDatabase, target string) (string, string, error) {
	conflict := func(format string, args ...any) error {
		return apierrors.NewConflict(example.Resource("mydatabases"), db.Name, fmt.Errorf(format, args...))
	}
	invalid := func(detail string) error {
		return apierrors.NewInvalid(switchoverKind, db.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "targetInstance"), target, detail),
		})
	}
	s := db.Status
	switch {
	case db.DeletionTimestamp != nil:
		return "", "", conflict("the database is being deleted")
	case s.CurrentPrimary == "":
		return "", "", conflict("the database has no primary yet")
	case s.TargetPrimary != "" && s.TargetPrimary != s.CurrentPrimary:
		reason := s.TargetPrimaryReason
		if reason == "" {
			reason = example.TargetPrimaryReasonSwitchover
		}
		return "", "", conflict("a %s from %s to %s is under way", reason, s.CurrentPrimary, s.TargetPrimary)
	}
	if target == "" {
		if best := mostCaughtUp(s); best != "" {
			return s.CurrentPrimary, best, nil
		}
		return "", "", apierrors.NewInvalid(switchoverKind, db.Name, field.ErrorList{
			field.Required(field.NewPath("spec", "targetInstance"), "no replica is ready to take over"),
		})
	}
	if target == s.CurrentPrimary {
		return "", "", invalid("is already the primary")
	}
	for _, in := range s.Instances {
		if in.Name != target {
			continue
		}
		if in.Role != example.InstanceRoleReplica || !in.Ready {
			msg := "is not a ready replica"
			if in.Message != "" {
				msg += ": " + in.Message
			}
			return "", "", invalid(msg)
		}
		return s.CurrentPrimary, target, nil
	}
	return "", "", invalid("is not an instance of the database")
}

// checkForcedFailoverRequest checks a forced failover of db to target: only
// while the controller holds a failover back (the PrimaryChange condition
// is True with reason FailoverWouldLoseWrites), and only to a named
// replica, which need not be ready (it follows a primary that is gone).
func checkForcedFailoverRequest(db *example.MyDatabase, target string) (string, string, error) {
	s := db.Status
	targetPath := field.NewPath("spec", "targetInstance")
	if target == "" {
		return "", "", apierrors.NewInvalid(switchoverKind, db.Name, field.ErrorList{
			field.Required(targetPath, "must name the replica to promote when allowWriteLoss is set"),
		})
	}
	held := meta.FindStatusCondition(s.Conditions, example.ConditionPrimaryChange)
	switch {
	case db.DeletionTimestamp != nil:
		return "", "", apierrors.NewConflict(example.Resource("mydatabases"), db.Name, fmt.Errorf("the database is being deleted"))
	case s.TargetPrimary != "" && s.TargetPrimary != s.CurrentPrimary:
		return "", "", apierrors.NewConflict(example.Resource("mydatabases"), db.Name,
			fmt.Errorf("a %s from %s to %s is under way", s.TargetPrimaryReason, s.CurrentPrimary, s.TargetPrimary))
	case held == nil || held.Status != metav1.ConditionTrue || held.Reason != example.ReasonFailoverWouldLoseWrites:
		return "", "", apierrors.NewConflict(example.Resource("mydatabases"), db.Name,
			fmt.Errorf("no failover is held back (allowWriteLoss may be set only while the %s condition's reason is %s); "+
				"a planned switchover needs no allowWriteLoss", example.ConditionPrimaryChange, example.ReasonFailoverWouldLoseWrites))
	case target == s.CurrentPrimary:
		return "", "", apierrors.NewInvalid(switchoverKind, db.Name, field.ErrorList{field.Invalid(targetPath, target, "is the primary that is lost")})
	}
	for _, in := range s.Instances {
		if in.Name == target {
			if in.Role != example.InstanceRoleReplica {
				return "", "", apierrors.NewInvalid(switchoverKind, db.Name, field.ErrorList{field.Invalid(targetPath, target, "is not a replica")})
			}
			return s.CurrentPrimary, target, nil
		}
	}
	return "", "", apierrors.NewInvalid(switchoverKind, db.Name, field.ErrorList{field.Invalid(targetPath, target, "is not an instance of the database")})
}

// mostCaughtUp is the ready replica with the most advanced position as the
// controller last reported it (the first ready one when none compares
// ahead), or "" when no replica is ready.
func mostCaughtUp(s example.MyDatabaseStatus) string {
	var best string
	var bestPos api.Position
	for _, in := range s.Instances {
		if in.Role != example.InstanceRoleReplica || !in.Ready || in.Name == s.CurrentPrimary {
			continue
		}
		var pos api.Position
		if in.Position != nil {
			pos = api.PositionFromInternal(*in.Position)
		}
		if best == "" || pos.Compare(bestPos) > 0 {
			best, bestPos = in.Name, pos
		}
	}
	return best
}
