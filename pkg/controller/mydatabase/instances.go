package mydatabase

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// StatusReader reads an instance manager's status (GET /v1/status):
// *api.Client, or a test's fake.
type StatusReader interface {
	Status(ctx context.Context, host string, auth api.Auth) (*api.Status, error)
}

// statusTimeout bounds one poll of an instance manager; lostStatusTimeout
// one of a manager its health stream says is lost. A frozen manager's
// connection does not refuse: the poll that confirms its loss, and the
// one that decides the failover, would each wait out the whole timeout
// (docs/replication.md, the machine stall), where a manager that streamed
// a line every 500 ms and answers at all answers within milliseconds.
const (
	statusTimeout     = 2 * time.Second
	lostStatusTimeout = 500 * time.Millisecond
)

// pollTimeout bounds the poll of an instance: lost tells that its health
// stream says it is lost.
func pollTimeout(lost bool) time.Duration {
	if lost {
		return lostStatusTimeout
	}
	return statusTimeout
}

// reconcileInstances decides which instance is the primary, labels every pod
// with its role so the Services route to it, and reads each instance
// manager's status into findings.
func (c *Controller) reconcileInstances(ctx context.Context, db *examplev1.MyDatabase, sts *appsv1.StatefulSet, f *findings) error {
	pods, err := c.podLister.Pods(db.Namespace).List(labels.SelectorFromSet(SelectorLabels(db)))
	if err != nil {
		return err
	}
	// Every pod of the database, terminating and beyond the StatefulSet's
	// replicas included: a hibernation is done only once none is left.
	f.podsLeft = len(pods)
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !isInstance(db, sts, p) })
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return ordinal(db, a.Name) - ordinal(db, b.Name) })
	f.pods = pods
	f.primary = choosePrimary(db, pods)
	if f.primary == "" {
		c.health.polled(cache.MetaObjectToName(db), pods, nil)
		return nil
	}
	for _, pod := range pods {
		role := names.RoleReplica
		if pod.Name == f.primary {
			role = names.RolePrimary
		}
		if pod.Labels[names.LabelRole] == role {
			continue
		}
		// The pod is the StatefulSet's: mydb owns only this label.
		label := corev1ac.Pod(pod.Name, pod.Namespace).WithLabels(map[string]string{names.LabelRole: role})
		if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).Apply(ctx, label, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return err
		}
	}
	f.instances, f.reports = c.pollInstances(ctx, db, pods, f.primary)
	ready := map[string]bool{}
	for _, in := range f.instances {
		ready[in.Name] = in.Ready
	}
	c.health.polled(cache.MetaObjectToName(db), pods, ready)
	c.positions.carry(db, f.instances, c.health.positions(cache.MetaObjectToName(db)))
	series.observeInstances(cache.MetaObjectToName(db), f.instances, f.reports)
	return nil
}

// isInstance tells whether pod is one of db's instances: made by db's
// StatefulSet (its controller reference names the StatefulSet's UID), with
// an ordinal below the StatefulSet's replicas. Labels and a <db>-<n> name
// alone prove nothing: anyone who may create pods in the namespace could
// add a pod that reports a huge position and be chosen as a failover
// target, or be sent backups and their S3 keys.
func isInstance(db *examplev1.MyDatabase, sts *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if sts == nil {
		return false
	}
	ref := metav1.GetControllerOf(pod)
	n := ordinal(db, pod.Name)
	return ref != nil && ref.Kind == "StatefulSet" && ref.UID == sts.UID && n >= 0 && n < int(ptr.Deref(sts.Spec.Replicas, 1))
}

// choosePrimary keeps the current primary; a new database's primary is its
// first pod. (Moving the role is switchover's and failover's to do.)
func choosePrimary(db *examplev1.MyDatabase, pods []*corev1.Pod) string {
	if db.Status.CurrentPrimary != "" {
		return db.Status.CurrentPrimary
	}
	if len(pods) == 0 {
		return ""
	}
	return pods[0].Name
}

// pollInstances reads every instance manager at once, each within
// statusTimeout, and reports the instances in pod order, with what each
// manager answered (nil where it did not). An instance that reports no
// position is given the one it reported last by positionMemory.carry: a
// replica lost together with the primary may have had the last
// acknowledged commits, and a failover under Sync replication must know how
// far it went (decision.stale drops it once the primary changes).
func (c *Controller) pollInstances(ctx context.Context, db *examplev1.MyDatabase, pods []*corev1.Pod, primary string) ([]examplev1.InstanceStatus, []*api.Status) {
	out := make([]examplev1.InstanceStatus, len(pods))
	reports := make([]*api.Status, len(pods))
	creds, credsErr := c.authority.Credentials(db.Namespace, db.Name)
	lost := c.health.lostSince(cache.MetaObjectToName(db))
	var wg sync.WaitGroup
	for i, pod := range pods {
		role := examplev1.InstanceRoleReplica
		if pod.Name == primary {
			role = examplev1.InstanceRolePrimary
		}
		out[i] = examplev1.InstanceStatus{Name: pod.Name, Address: pod.Status.PodIP, Role: role, Revision: pod.Labels[appsv1.StatefulSetRevisionLabel]}
		if pod.Spec.NodeName != "" && pod.Status.Phase == corev1.PodFailed {
			out[i].Message = "the pod failed"
			continue
		}
		if pod.Status.PodIP == "" {
			out[i].Message = "the pod has no IP yet"
			continue
		}
		if credsErr != nil {
			out[i].Message = "cannot authenticate to the instance manager: " + credsErr.Error()
			continue
		}
		c.health.watch(cache.MetaObjectToName(db), pod, api.Auth{Credentials: creds, Name: pod.Name})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, isLost := lost[pod.Name]
			ctx, cancel := context.WithTimeout(ctx, pollTimeout(isLost))
			defer cancel()
			s, err := c.statuses.Status(ctx, pod.Status.PodIP, api.Auth{Credentials: creds, Name: pod.Name})
			switch {
			case err == nil && s.Name != pod.Name:
				// The pod's IP was another pod's, whose manager still
				// answers there: its report is not this instance's.
				s, err = nil, fmt.Errorf("the manager at %s answers as %q", pod.Status.PodIP, s.Name)
			case err == nil && s.PodUID != "" && s.PodUID != string(pod.UID):
				// The same name, an older pod: a replaced pod's process
				// still answers at the new pod's IP.
				s, err = nil, fmt.Errorf("the manager at %s runs for an earlier pod %s (uid %s)", pod.Status.PodIP, s.Name, s.PodUID)
			}
			out[i].Ready, out[i].Message = instanceReadiness(s, err, role, primary)
			out[i].Fenced = s != nil && s.Fenced
			if s != nil {
				out[i].Position = api.PositionToV1(s.Position)
			}
			reports[i] = s
		}()
	}
	wg.Wait()
	return out, reports
}

// instanceReadiness tells whether an instance serves the role mydb gave it,
// and why not.
func instanceReadiness(s *api.Status, err error, role examplev1.InstanceRole, primary string) (bool, string) {
	switch {
	case err != nil:
		return false, "the instance manager did not answer: " + err.Error()
	case s.Primary != primary:
		return false, fmt.Sprintf("the instance still follows %q as its primary", s.Primary)
	case role == examplev1.InstanceRolePrimary && s.Role != api.RolePrimary,
		role == examplev1.InstanceRoleReplica && s.Role != api.RoleReplica:
		return false, fmt.Sprintf("the instance acts as %s", s.Role)
	case !s.Ready:
		return false, s.Reason
	}
	return true, ""
}

// positionMemory holds the position each instance manager last reported to
// this controller. Positions are not written to the status whenever they
// move (statusWorthWriting), so the status write that says an instance was
// lost must take its last position from here: a failover decided by
// another leader after a leader change reads it there. It is per leader,
// like the failover incidents: a new leader starts from the positions stored.
type positionMemory struct {
	mu   sync.Mutex
	last map[cache.ObjectName]rememberedPositions
}

type rememberedPositions struct {
	uid types.UID
	at  map[string]examplev1.InstancePosition
}

// carry remembers the positions in instances, and gives an instance that
// reported none the one it reported last to this controller (in a poll, or
// on its health stream: streamed, the further of the two), or else the one
// stored in db's status.
func (m *positionMemory) carry(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, streamed map[string]api.Position) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := cache.MetaObjectToName(db)
	r, ok := m.last[key]
	if !ok || r.uid != db.UID {
		r = rememberedPositions{uid: db.UID, at: map[string]examplev1.InstancePosition{}}
		for _, in := range db.Status.Instances {
			if in.Position != nil {
				r.at[in.Name] = *in.Position
			}
		}
		if m.last == nil {
			m.last = map[cache.ObjectName]rememberedPositions{}
		}
		m.last[key] = r
	}
	for i := range instances {
		in := &instances[i]
		if in.Position == nil {
			if p, ok := streamed[in.Name]; ok {
				remembered, ok := r.at[in.Name]
				if !ok || p.Compare(api.PositionFromV1(remembered)) > 0 {
					in.Position = api.PositionToV1(&p)
				}
			}
		}
		if in.Position != nil {
			r.at[in.Name] = *in.Position
		} else if p, ok := r.at[in.Name]; ok {
			in.Position = p.DeepCopy()
		}
	}
}

// forget drops what was remembered of a database: it is gone, or its
// primary changed and the positions reported relative to the old one are
// history.
func (m *positionMemory) forget(db cache.ObjectName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, db)
}

// ordinal is the StatefulSet ordinal of a pod of db, or -1 for a pod that
// is not one of its replicas.
func ordinal(db *examplev1.MyDatabase, pod string) int {
	suffix, ok := strings.CutPrefix(pod, names.StatefulSet(db.Name)+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 0 || strconv.Itoa(n) != suffix {
		return -1
	}
	return n
}
