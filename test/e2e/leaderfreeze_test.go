//go:build e2e && faults

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/test/stats"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// staleAfter is how long after a newer spec was acknowledged a StatefulSet
// may still be seen with the one before: the time from a leader's read of
// the spec to its write of the StatefulSet landing, with ample margin on a
// loaded machine. A leader woken from a freeze longer than its lease would
// write specs it read before the freeze.
const staleAfter = 5 * time.Second

// TestFrozenLeaderWritesNothingAfterTakeover freezes the controllers'
// leader with SIGSTOP, for longer than its lease, while a client makes spec
// changes (replicas between 1 and 3, and the CPU request) to several
// MyDatabases through a standby mydb-apiserver; the standby takes the lease
// over and reconciles; then the old leader is let go on (SIGCONT) with the
// caches and the half-done reconciles of before the freeze. Who wrote what
// comes from the audit logs make local-up's API servers keep
// (artifacts/local/audit-policy.yaml): kube-apiserver's for the children,
// each mydb-apiserver's own for MyDatabase status, told apart by the
// replica's Lease identity ending the controllers' user agent. It asserts:
// no write at all by the old leader after the standby acquired the lease
// (the children and the MyDatabases; events and the Lease aside), though
// the log shows it wrote before the freeze and the new leader after; every
// version of every StatefulSet the watch saw has the replicas and CPU of a
// spec that was current (superseded less than staleAfter before); at the
// end every StatefulSet has its database's final spec; the old leader says
// in its log and /metrics that it stopped leading.
//
// MYDB_E2E_LONG=1 makes 200 changes to 8 databases instead of 100 to 4;
// the freeze is 20 s in both.
func TestFrozenLeaderWritesNothingAfterTakeover(t *testing.T) {
	changes, databases := 100, 4
	if os.Getenv("MYDB_E2E_LONG") == "1" {
		changes, databases = 200, 8
	}
	const freeze = 20 * time.Second
	// Changes are spread over some seconds before the freeze, the freeze,
	// and some seconds after it, when both replicas run.
	const before, after = 4 * time.Second, 8 * time.Second
	ctx := context.Background()
	localDir := e2eLocalDir
	kubeAudit := filepath.Join(localDir, "logs", "kube-apiserver-audit.log")
	leaderAudit := filepath.Join(localDir, "logs", "mydb-apiserver-audit.log")

	sb := startStandby(t)
	if holder, err := leaseHolder(ctx, t); err != nil || holder != sb.leaderIdentity {
		t.Fatalf("lease held by %q (%v), want local-up's %q", holder, err, sb.leaderIdentity)
	}
	kubeFrom, leaderFrom, standbyFrom := auditSize(t, kubeAudit), auditSize(t, leaderAudit), auditSize(t, sb.auditLog)
	oldLog := fileSize(t, sb.leaderLog)
	// Everything goes to the standby: the aggregator's backend is the
	// leader, which will be frozen.
	ns := newNamespace(t)
	dbs := mydbClient(t, sb.config).ExampleV1().MyDatabases(ns)
	kube := kubeClient(t)

	specs := &specRecord{versions: map[string][]specVersion{}}
	var names []string
	for i := 0; i < databases; i++ {
		name := fmt.Sprintf("frozen-%d", i)
		sent := time.Now()
		db, err := dbs.Create(ctx, &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi"), Replicas: ptr.To[int32](1)}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		specs.add(name, sent, db)
		names = append(names, name)
	}
	eventually(t, reconcileTimeout, func() error { return statefulSetsMatch(ctx, kube, ns, specs) })
	sets := watchStatefulSets(t, kube, ns)

	// The client: one change every interval, each to the next database,
	// to replicas and a CPU request other than its current ones.
	interval := (before + freeze + after) / time.Duration(changes)
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		rng := rand.New(rand.NewSource(time.Now().UnixNano()))
		start := time.Now()
		for k := 0; k < changes; k++ {
			time.Sleep(time.Until(start.Add(time.Duration(k) * interval)))
			name := names[k%len(names)]
			cur := specs.last(name).fp
			next := cur
			for next == cur {
				next = fingerprint{replicas: 1 + rng.Int31n(3), cpuMilli: 100 * (1 + rng.Int63n(9))}
			}
			patch := fmt.Sprintf(`{"spec":{"replicas":%d,"resources":{"requests":{"cpu":"%dm"}}}}`, next.replicas, next.cpuMilli)
			sent := time.Now()
			db, err := dbs.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				t.Errorf("change %d of %s: %v", k, name, err)
				continue
			}
			specs.add(name, sent, db)
		}
	}()

	time.Sleep(before)
	t.Cleanup(func() { _ = syscall.Kill(sb.leaderPID, syscall.SIGCONT) })
	if err := syscall.Kill(sb.leaderPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The standby sees the lease expire the lease duration after it last
	// saw a renewal, and tries every 2 s jittered by up to 120%: 20 s is
	// not always enough. The freeze lasts until it has the lease.
	eventually(t, 2*sb.leaseDuration+10*time.Second, func() error {
		if holder, err := leaseHolder(ctx, t); err != nil || holder != sb.identity {
			return fmt.Errorf("lease held by %q (%v) %s after SIGSTOP", holder, err, time.Since(stopped).Round(time.Second))
		}
		return nil
	})
	time.Sleep(time.Until(stopped.Add(freeze)))
	if err := syscall.Kill(sb.leaderPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	if frozenFor := resumed.Sub(stopped); frozenFor > freeze+time.Second {
		t.Logf("the leader stayed frozen %s, until the standby had the lease", frozenFor.Round(10*time.Millisecond))
	}
	<-changed
	lastChange := time.Now()
	eventually(t, reconcileTimeout, func() error { return statefulSetsMatch(ctx, kube, ns, specs) })
	converged := time.Now()
	// Long enough for anything the old leader still sent to be logged.
	time.Sleep(time.Until(resumed.Add(15 * time.Second)))
	stsVersions := sets.stop()

	// Who wrote what, from the audit logs.
	kubeWrites := readAudit(t, kubeAudit, kubeFrom)
	takeover, ok := leaseTakeover(kubeWrites, sb.identity)
	if !ok {
		t.Fatalf("kube-apiserver's audit log (%s) shows no acquisition of the Lease by the standby %s", kubeAudit, sb.identity)
	}
	children := func(evs []auditv1.Event) []auditv1.Event {
		var out []auditv1.Event
		for _, e := range evs {
			if e.ObjectRef != nil && e.ObjectRef.Namespace == ns && e.ObjectRef.Resource != "events" {
				out = append(out, e)
			}
		}
		return out
	}
	oldBefore, oldAfter := splitByWriter(children(kubeWrites), sb.leaderIdentity, takeover)
	newBefore, newAfter := splitByWriter(children(kubeWrites), sb.identity, takeover)
	// Each mydb-apiserver logs its own loopback writes, the controllers'
	// MyDatabase status and finalizer writes among them.
	statusBefore, statusAfter := splitByWriter(children(readAudit(t, leaderAudit, leaderFrom)), sb.leaderIdentity, takeover)
	_, newStatus := splitByWriter(children(readAudit(t, sb.auditLog, standbyFrom)), sb.identity, takeover)
	if len(oldBefore) == 0 || len(statusBefore) == 0 {
		t.Fatalf("the audit logs show %d writes of children and %d of MyDatabases by the leader before the freeze: they do not tell the replicas apart", len(oldBefore), len(statusBefore))
	}
	if len(newAfter) == 0 || len(newStatus) == 0 {
		t.Fatalf("the audit logs show %d writes of children and %d of MyDatabases by the new leader", len(newAfter), len(newStatus))
	}
	for _, e := range append(oldAfter, statusAfter...) {
		t.Errorf("the old leader wrote after the takeover at %s: %s %s %s/%s at %s (code %d)", takeover.Format(time.StampMicro),
			e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name, e.ObjectRef.Subresource, e.RequestReceivedTimestamp.Format(time.StampMicro), code(e))
	}
	if len(newBefore) > 0 {
		t.Errorf("the standby wrote %d children before it acquired the Lease", len(newBefore))
	}

	// No StatefulSet ever had a superseded spec, and each has its final one.
	scaled := 0
	for _, v := range stsVersions {
		if why := specs.stale(v); why != "" {
			scaled++
			t.Errorf("StatefulSet %s rv %s seen %s after SIGSTOP with replicas %d, CPU %dm: %s",
				v.name, v.rv, v.seen.Sub(stopped).Round(time.Millisecond), v.fp.replicas, v.fp.cpuMilli, why)
		}
	}

	// The old leader knows it lost.
	oldMetrics := scrape(t, directConfig(t, localMydbPort(t)))
	if !strings.Contains(oldMetrics, `leader_election_master_status{name="mydb-controller"} 0`) {
		t.Errorf("the old leader does not say it stopped leading in /metrics")
	}
	stoppedLeading, ok := logTime(readFrom(t, sb.leaderLog, oldLog), "Not leading", resumed)
	if !ok {
		t.Errorf("the old leader's log does not say it stopped leading after SIGCONT")
	}

	firstWrite := newAfter[0].RequestReceivedTimestamp.Time
	frozen, outside := specs.reflection(stsVersions, stopped, takeover)
	t.Logf("FIGURES: %d spec changes to %d MyDatabases, one every %s; SIGSTOP of the leader for %s, %d changes held up by it",
		changes, databases, interval.Round(time.Millisecond), resumed.Sub(stopped).Round(10*time.Millisecond), len(frozen))
	t.Logf("FIGURES: takeover: the standby acquired the Lease %s after SIGSTOP (lease duration %s), its first write of a child %s after SIGSTOP",
		takeover.Sub(stopped).Round(10*time.Millisecond), sb.leaseDuration, firstWrite.Sub(stopped).Round(10*time.Millisecond))
	t.Logf("FIGURES: writes by the old leader: %d children and %d MyDatabase before the freeze, %d and %d after the takeover; by the new leader after it: %d and %d",
		len(oldBefore), len(statusBefore), len(oldAfter), len(statusAfter), len(newAfter), len(newStatus))
	t.Logf("FIGURES: the old leader stopped its controllers %s after SIGCONT; its fence held back %s writes (mydb_controller_fenced_writes_total)",
		stoppedLeading.Sub(resumed).Round(time.Millisecond), metricValue(oldMetrics, "mydb_controller_fenced_writes_total"))
	t.Logf("FIGURES: %d StatefulSet versions seen, %d with a superseded spec; spec write to StatefulSet: changes held up by the freeze p50 %s max %s, others p50 %s p99 %s max %s",
		len(stsVersions), scaled, stats.Percentile(frozen, 50), stats.Percentile(frozen, 100), stats.Percentile(outside, 50), stats.Percentile(outside, 99), stats.Percentile(outside, 100))
	t.Logf("FIGURES: every StatefulSet had its final spec %s after the last change (SIGCONT %s after SIGSTOP)",
		converged.Sub(lastChange).Round(10*time.Millisecond), resumed.Sub(stopped).Round(10*time.Millisecond))
}

// fingerprint is what a spec change sets that the StatefulSet carries.
type fingerprint struct {
	replicas int32
	cpuMilli int64
}

func specFingerprint(db *examplev1.MyDatabase) fingerprint {
	cpu := db.Spec.Resources.Requests[corev1.ResourceCPU]
	return fingerprint{replicas: ptr.Deref(db.Spec.Replicas, 1), cpuMilli: cpu.MilliValue()}
}

// stsFingerprint is the replicas and the database container's CPU request.
func stsFingerprint(sts *appsv1.StatefulSet) fingerprint {
	fp := fingerprint{replicas: ptr.Deref(sts.Spec.Replicas, 1)}
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == engine.StatusPortName {
				cpu := c.Resources.Requests[corev1.ResourceCPU]
				fp.cpuMilli = cpu.MilliValue()
			}
		}
	}
	return fp
}

// specVersion is one acknowledged spec of a database.
type specVersion struct {
	fp         fingerprint
	sent, ack  time.Time
	generation int64
}

// specRecord holds every acknowledged spec of every database, in order.
type specRecord struct {
	mu       sync.Mutex
	versions map[string][]specVersion
}

func (r *specRecord) add(name string, sent time.Time, db *examplev1.MyDatabase) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[name] = append(r.versions[name], specVersion{fp: specFingerprint(db), sent: sent, ack: time.Now(), generation: db.Generation})
}

func (r *specRecord) last(name string) specVersion {
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.versions[name]
	return vs[len(vs)-1]
}

// stale says why a StatefulSet version has a spec that was not current
// when it was seen: none of its database's acknowledged specs has its
// replicas and CPU, or each that has was superseded more than staleAfter
// before. "" when it was current.
func (r *specRecord) stale(v stsVersion) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.versions[v.name]     // a StatefulSet has its database's name
	var superseded time.Duration // the least, of the specs that had them
	for j, s := range vs {
		if s.fp != v.fp || s.sent.After(v.seen) {
			continue
		}
		if j == len(vs)-1 || vs[j+1].ack.After(v.seen.Add(-staleAfter)) {
			return ""
		}
		if d := v.seen.Sub(vs[j+1].ack); superseded == 0 || d < superseded {
			superseded = d
		}
	}
	if superseded == 0 {
		return "no spec of the database had them"
	}
	return fmt.Sprintf("the latest spec that had them was superseded %s before (more than %s)", superseded.Round(time.Millisecond), staleAfter)
}

// reflection is, for each spec change, the time from sending it to the
// first StatefulSet version with it or a later one: for those the freeze
// held up (sent before the takeover, reflected after SIGSTOP), and for the
// others.
func (r *specRecord) reflection(sets []stsVersion, stopped, takeover time.Time) (frozen, outside []time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, vs := range r.versions {
		for j := 1; j < len(vs); j++ {
			for _, v := range sets {
				if v.name != name || v.seen.Before(vs[j].sent) {
					continue
				}
				reflected := false
				for _, later := range vs[j:] {
					reflected = reflected || (later.fp == v.fp && !later.sent.After(v.seen))
				}
				if !reflected {
					continue
				}
				if d := v.seen.Sub(vs[j].sent); vs[j].sent.Before(takeover) && !v.seen.Before(stopped) {
					frozen = append(frozen, d)
				} else {
					outside = append(outside, d)
				}
				break
			}
		}
	}
	return frozen, outside
}

// statefulSetsMatch checks that every database's StatefulSet has its last
// acknowledged spec.
func statefulSetsMatch(ctx context.Context, kube kubernetes.Interface, ns string, specs *specRecord) error {
	specs.mu.Lock()
	want := map[string]fingerprint{}
	for name, vs := range specs.versions {
		want[name] = vs[len(vs)-1].fp
	}
	specs.mu.Unlock()
	for name, fp := range want {
		sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := stsFingerprint(sts); got != fp {
			return fmt.Errorf("StatefulSet %s has replicas %d, CPU %dm; its database's spec says %d, %dm", name, got.replicas, got.cpuMilli, fp.replicas, fp.cpuMilli)
		}
	}
	return nil
}

// stsVersion is one version of a StatefulSet's spec, as a watch delivered it.
type stsVersion struct {
	name, rv string
	fp       fingerprint
	seen     time.Time
}

type stsRecorder struct {
	mu       sync.Mutex
	versions []stsVersion
	stop     func() []stsVersion
}

// watchStatefulSets records every new spec (generation) of the
// StatefulSets in ns, from their versions now on, re-watching from the
// last one seen if a watch ends.
func watchStatefulSets(t *testing.T, kube kubernetes.Interface, ns string) *stsRecorder {
	t.Helper()
	list, err := kube.AppsV1().StatefulSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &stsRecorder{}
	generations := map[string]int64{}
	add := func(sts *appsv1.StatefulSet) {
		if sts.Generation <= generations[sts.Name] {
			return // a status write
		}
		generations[sts.Name] = sts.Generation
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.versions = append(rec.versions, stsVersion{name: sts.Name, rv: sts.ResourceVersion, fp: stsFingerprint(sts), seen: time.Now()})
	}
	for i := range list.Items {
		add(&list.Items[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			wi, err := kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() == nil {
						t.Errorf("watch of StatefulSets: %v", ev.Object)
					}
					break
				}
				if sts, ok := ev.Object.(*appsv1.StatefulSet); ok {
					rv = sts.ResourceVersion
					if ev.Type == watch.Added || ev.Type == watch.Modified {
						add(sts)
					}
				}
			}
			wi.Stop()
		}
	}()
	stopped := sync.OnceValue(func() []stsVersion {
		cancel()
		<-done
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return append([]stsVersion(nil), rec.versions...)
	})
	rec.stop = stopped
	t.Cleanup(func() { stopped() })
	return rec
}

// replicaOf tells whether e was sent by the controllers of replica identity.
func replicaOf(e auditv1.Event, identity string) bool {
	return strings.HasSuffix(e.UserAgent, " replica/"+identity)
}

// leaseTakeover is when kube-apiserver received the write by which
// identity acquired the controllers' Lease.
func leaseTakeover(evs []auditv1.Event, identity string) (time.Time, bool) {
	for _, e := range evs {
		if e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == leaseName &&
			replicaOf(e, identity) && code(e) < 300 {
			return e.RequestReceivedTimestamp.Time, true
		}
	}
	return time.Time{}, false
}

// splitByWriter is identity's writes among evs received before at, and
// those received at or after it.
func splitByWriter(evs []auditv1.Event, identity string, at time.Time) (before, after []auditv1.Event) {
	for _, e := range evs {
		if !replicaOf(e, identity) {
			continue
		}
		if e.RequestReceivedTimestamp.Before(&metav1.MicroTime{Time: at}) {
			before = append(before, e)
		} else {
			after = append(after, e)
		}
	}
	return before, after
}

func code(e auditv1.Event) int32 {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// logTime is when the first klog line of log containing text was
// written, that line being from the day of near.
func logTime(log, text string, near time.Time) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		fields := strings.Fields(line)
		if !strings.Contains(line, text) || len(fields) < 2 || len(fields[0]) != 5 {
			continue
		}
		at, err := time.ParseInLocation("0102 15:04:05.000000", fields[0][1:]+" "+fields[1], time.Local)
		if err != nil {
			continue
		}
		return at.AddDate(near.Year(), 0, 0), true
	}
	return time.Time{}, false
}

// metricValue is the value of an unlabelled series in a /metrics text.
func metricValue(metrics, name string) string {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "no"
}
