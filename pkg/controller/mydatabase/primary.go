package mydatabase

import (
	"context"
	"sync"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Moving the primary role: switchover (asked for through POST .../switchover,
// which sets status.targetPrimary) and failover (a primary unready for
// spec.failoverDelay). package failover decides; the controller gathers
// what it decides from, remembers the incident between polls, and applies
// the decision: every move is one status write with the resourceVersion it
// was decided from, so two mydb replicas, or a leader that paused and
// resumed with a stale cache, cannot both make it: the loser's write
// conflicts, and it re-reads.

// incidents remembers, per database, the failover incident of its primary
// between polls (failover.Incident says why only in memory).
type incidents struct {
	mu   sync.Mutex
	byDB map[types.UID]failover.Incident
}

func (s *incidents) get(db types.UID) *failover.Incident {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.byDB[db]; ok {
		return &in
	}
	return nil
}

// set remembers in (nil: forgets db's incident).
func (s *incidents) set(db types.UID, in *failover.Incident) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in == nil {
		delete(s.byDB, db)
		return
	}
	if s.byDB == nil {
		s.byDB = map[types.UID]failover.Incident{}
	}
	s.byDB[db] = *in
}

// decidePrimary asks package failover what to do about db's primary after
// a poll (instances as computed, reports[i] what instances[i]'s manager
// answered), remembers the incident and says its Warnings.
func (c *Controller) decidePrimary(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, reports []*api.Status) failover.Decision {
	d := failover.Decide(failover.Input{
		Database: db, Instances: instances, Reports: reports,
		Incident: c.incidents.get(db.UID), LostSince: c.health.lostSince(cache.MetaObjectToName(db)), Now: c.clock.Now(),
	}, failover.Policy{PollInterval: c.config.PollInterval, SwitchoverTimeout: c.config.SwitchoverTimeout})
	c.incidents.set(db.UID, d.Incident)
	for _, e := range d.Warnings {
		c.recorder.Event(db, e.Type, e.Reason, e.Message)
	}
	return d
}

// writePrimaryChange writes a change that moves the primary or the target
// with the resourceVersion it was decided from, then says it: Event and
// metrics only once the write won.
func (c *Controller) writePrimaryChange(ctx context.Context, db *examplev1.MyDatabase, status examplev1.MyDatabaseStatus, change *failover.Change) error {
	updated := db.DeepCopy()
	updated.Status = status
	change.Apply(&updated.Status, c.clock.Now())
	if _, err := c.mydbClient.ExampleV1().MyDatabases(db.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.incidents.set(db.UID, nil)
	if change.Current != db.Status.CurrentPrimary {
		c.positions.forget(cache.MetaObjectToName(db))
		c.health.forgetPositions(cache.MetaObjectToName(db))
	}
	c.recorder.Event(db, change.Event.Type, change.Event.Reason, change.Event.Message)
	if change.Result != "" {
		// Counted once it ends (a rollout's switchover starts here).
		observePrimaryChange(db, change.Kind, change.Result, change.Duration)
	}
	return nil
}
