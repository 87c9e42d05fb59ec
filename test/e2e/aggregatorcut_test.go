//go:build e2e && faults

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	"github.com/mydb-dev/mydb/test/stats"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	countAnnotation  = "e2e.mydb.example.com/count"
	writerAnnotation = "e2e.mydb.example.com/writer"
)

// The bounds TestACutBetweenTheAggregatorAndMydb holds the aggregator to.
const (
	// A request during the cut is answered 503 at once: the aggregator's
	// dial is reset, or it already holds the APIService unavailable.
	cutFailFastBound = 2 * time.Second
	// After the cut, requests succeed again once the aggregator's
	// availability controller checked mydb anew: it re-checks a failing
	// APIService with a backoff that doubles up to 30 s, and every
	// APIService every 30 s, and a check waits up to 5 s.
	cutRecoveryBound = 40 * time.Second
)

// TestACutBetweenTheAggregatorAndMydb cuts kube-apiserver off from
// mydb-apiserver for 30 s: the TCP proxy where the aggregator dials
// (mydbService, one replica behind it) resets every open connection and
// every new one, as a partition that answers with resets. Meanwhile two
// creators create MyDatabases under fixed names, one after another,
// retrying each until it is created or answered 409 AlreadyExists after a
// failed attempt (an earlier attempt landed); three updaters increment a
// counter annotation of their own database with Updates that carry the
// resourceVersion they read, retried alike; a prober lists every 100 ms.
// It asserts: every request during the cut failed with 503 within
// cutFailFastBound; requests succeed again within cutRecoveryBound of the
// cut's end, and the APIService is Available again; every name exists
// once, with the UID its create was answered with, and no other object;
// every counter (each update sets it to the count it read plus one) equals
// the increments its updater was told were applied, or found applied
// after a lost answer (a retry answered 409 Conflict, and the database
// names that increment as its last writer): no update was applied twice,
// and none was lost.
func TestACutBetweenTheAggregatorAndMydb(t *testing.T) {
	const cut = 30 * time.Second
	const creators, updaters = 2, 3
	svc := startMydbService(t, 1)
	ns := newNamespace(t)
	cfg := restConfig(t)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Timeout = 15 * time.Second
	dbs := mydbClient(t, cfg).ExampleV1().MyDatabases(ns)
	log := &attemptLog{}

	counters := make([]*cutCounter, updaters)
	for i := range counters {
		db, err := dbs.Create(context.Background(), cutDatabase(fmt.Sprintf("counter-%d", i), map[string]string{countAnnotation: "0"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		counters[i] = &cutCounter{name: db.Name}
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	createStarted := make(chan struct{}, 1)
	cs := make([]*cutCreator, creators)
	wg.Add(creators + updaters + 1)
	for i := range cs {
		cs[i] = &cutCreator{client: fmt.Sprintf("creator-%d", i), started: createStarted}
		go func(c *cutCreator) { defer wg.Done(); c.run(ctx, dbs, log) }(cs[i])
	}
	for i, c := range counters {
		go func(i int, c *cutCounter) { defer wg.Done(); c.run(ctx, dbs, i, log) }(i, c)
	}
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			log.try("prober", func() error {
				_, err := dbs.List(context.Background(), metav1.ListOptions{Limit: 1})
				return err
			})
			time.Sleep(100 * time.Millisecond)
		}
	}()
	availability := watchAvailability(ctx, t)

	// The cut falls three quarters of a create's median latency after one
	// began: then a create is likely to be in mydb, committed or about to
	// be, with its answer still to come.
	time.Sleep(5 * time.Second)
	var createLatency []time.Duration
	for _, a := range log.all() {
		if strings.HasPrefix(a.client, "creator-") && a.err == nil {
			createLatency = append(createLatency, a.end.Sub(a.start))
		}
	}
	select {
	case <-createStarted:
	default:
	}
	<-createStarted
	time.Sleep(stats.Percentile(createLatency, 50) * 3 / 4)
	cutAt := time.Now()
	svc.proxy.Cut()
	t.Logf("cut kube-apiserver off from mydb-apiserver for %s, %s after a create began (creates take p50 %s)",
		cut, stats.Percentile(createLatency, 50)*3/4, stats.Percentile(createLatency, 50))
	time.Sleep(cut)
	svc.proxy.Restore()
	restoredAt := time.Now()
	t.Logf("the proxy forwards again")

	var recovered time.Time
	eventually(t, cutRecoveryBound+20*time.Second, func() error {
		if recovered = log.firstSuccessAfter("prober", restoredAt); recovered.IsZero() {
			return fmt.Errorf("no list has succeeded since the cut ended")
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	stop()
	wg.Wait()
	avail := availability()

	// During the cut: 503, fast.
	var failLatency []time.Duration
	reasons := map[string]int{}
	for _, a := range log.between(cutAt, restoredAt) {
		if a.err == nil {
			t.Errorf("%s: a request at %s into the cut succeeded", a.client, a.start.Sub(cutAt).Round(time.Millisecond))
			continue
		}
		failLatency = append(failLatency, a.end.Sub(a.start))
		if a.code != http.StatusServiceUnavailable {
			t.Errorf("%s: a request %s into the cut failed with %d, want 503: %v", a.client, a.start.Sub(cutAt).Round(time.Millisecond), a.code, a.err)
		}
		reasons[cutReason(a.err)]++
	}
	if len(failLatency) == 0 {
		t.Fatal("no request was made during the cut")
	}
	if worst := stats.Percentile(failLatency, 100); worst > cutFailFastBound {
		t.Errorf("the slowest failure during the cut took %s, more than %s", worst, cutFailFastBound)
	}
	recovery := recovered.Sub(restoredAt)
	if recovery > cutRecoveryBound {
		t.Errorf("requests succeeded again %s after the cut ended, more than %s", recovery, cutRecoveryBound)
	}
	if err := apiServiceAvailable(t); err != nil {
		t.Errorf("after the cut: %v", err)
	}
	// Outside the cut and its recovery, nothing failed (an updater's 409
	// Conflict is an answer: the controller wrote the database's status
	// since the read).
	for _, a := range log.all() {
		if a.err != nil && a.code != http.StatusConflict && (a.end.Before(cutAt) || a.start.After(recovered)) {
			t.Errorf("%s: a request %s after the cut began failed outside it: %v", a.client, a.start.Sub(cutAt).Round(time.Millisecond), a.err)
		}
	}

	// Nothing written twice.
	list, err := dbs.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]types.UID{}
	for _, db := range list.Items {
		if _, dup := have[db.Name]; dup {
			t.Errorf("%s is listed twice", db.Name)
		}
		have[db.Name] = db.UID
	}
	creates := 0
	uids := map[string]types.UID{}
	for _, c := range cs {
		for name, uid := range c.uids {
			uids[name] = uid
		}
	}
	for name, uid := range uids {
		creates++
		switch got, ok := have[name]; {
		case !ok:
			t.Errorf("%s was created (uid %q) and is gone", name, uid)
		case uid != "" && got != uid:
			t.Errorf("%s was created with uid %s and is now uid %s: created twice", name, uid, got)
		}
	}
	if want := creates + updaters; len(list.Items) != want {
		t.Errorf("%d MyDatabases in the namespace, want %d (%d creates and %d counters)", len(list.Items), want, creates, updaters)
	}
	for _, c := range counters {
		db, err := dbs.Get(context.Background(), c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := db.Annotations[countAnnotation]; got != strconv.Itoa(c.applied) {
			t.Errorf("%s counts %s, but %d increments were applied (%d of them found applied after their answer was lost)", c.name, got, c.applied, c.foundApplied)
		}
	}

	t.Logf("FIGURES: cut %s; %d requests during it, all failed: 503 in p50 %s, max %s; reasons %v",
		cut, len(failLatency), stats.Percentile(failLatency, 50), stats.Percentile(failLatency, 100), reasons)
	t.Logf("FIGURES: APIService v1.example.com: %s", describeAvailability(avail, cutAt, restoredAt))
	t.Logf("FIGURES: requests succeeded again %s after the cut ended (first successful list)", recovery.Round(10*time.Millisecond))
	ambiguous, retriedCreates, mostAttempts := 0, 0, 0
	for _, c := range cs {
		for _, n := range c.attempts {
			if n > 1 {
				retriedCreates++
			}
			mostAttempts = max(mostAttempts, n)
		}
	}
	for _, uid := range uids {
		if uid == "" {
			ambiguous++
		}
	}
	t.Logf("FIGURES: %d creates (%d retried, up to %d attempts; %d answered 409 AlreadyExists on a retry: an earlier attempt had landed); %d objects, none twice",
		creates, retriedCreates, mostAttempts, ambiguous, len(list.Items))
	for _, c := range counters {
		t.Logf("FIGURES: %s: %d increments applied (%d found applied after a lost answer), %d conflicts retried with a fresh read; count %d",
			c.name, c.applied, c.foundApplied, c.conflicts, c.applied)
	}
}

func cutDatabase(name string, annotations map[string]string) *examplev1.MyDatabase {
	return &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi"), Replicas: ptr.To[int32](1)},
	}
}

// cutCreator creates <client>-000, <client>-001, ... one after the
// other, and tells started whenever it sends one.
type cutCreator struct {
	client   string
	started  chan<- struct{}
	uids     map[string]types.UID // the uid each create was answered with; "" when a retry found it created
	attempts map[string]int
}

func (c *cutCreator) run(ctx context.Context, dbs typedv1.MyDatabaseInterface, log *attemptLog) {
	c.uids, c.attempts = map[string]types.UID{}, map[string]int{}
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s-%03d", c.client, i)
		for {
			c.attempts[name]++
			select {
			case c.started <- struct{}{}:
			default:
			}
			var got *examplev1.MyDatabase
			err := log.try(c.client, func() (err error) {
				got, err = dbs.Create(context.Background(), cutDatabase(name, nil), metav1.CreateOptions{})
				return err
			})
			if err == nil {
				c.uids[name] = got.UID
				break
			}
			if apierrors.IsAlreadyExists(err) && c.attempts[name] > 1 {
				c.uids[name] = ""
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// cutCounter is a database whose count annotation one updater increments.
type cutCounter struct {
	name                             string
	applied, foundApplied, conflicts int
}

// run increments the count: it reads the database, and updates it with
// the resourceVersion it read, retrying the same update while the answers
// are lost. A 409 Conflict says the database changed since the read: if
// the change is this increment (the writer annotation names it), an
// earlier attempt was applied; otherwise it reads again and starts over.
func (c *cutCounter) run(ctx context.Context, dbs typedv1.MyDatabaseInterface, i int, log *attemptLog) {
	client := fmt.Sprintf("updater-%d", i)
	read := func() *examplev1.MyDatabase {
		for {
			var db *examplev1.MyDatabase
			if err := log.try(client, func() (err error) {
				db, err = dbs.Get(context.Background(), c.name, metav1.GetOptions{})
				return err
			}); err == nil {
				return db
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for n := 1; ctx.Err() == nil; n++ {
		token := fmt.Sprintf("%s-%d", client, n)
		for {
			db := read()
			count, err := strconv.Atoi(db.Annotations[countAnnotation])
			if err != nil {
				panic(fmt.Sprintf("%s: count %q", c.name, db.Annotations[countAnnotation]))
			}
			db.Annotations[countAnnotation] = strconv.Itoa(count + 1)
			db.Annotations[writerAnnotation] = token
			for {
				err = log.try(client, func() error {
					_, err := dbs.Update(context.Background(), db, metav1.UpdateOptions{})
					return err
				})
				if err == nil || apierrors.IsConflict(err) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err == nil {
				c.applied++
				break
			}
			if read().Annotations[writerAnnotation] == token {
				c.applied++
				c.foundApplied++
				break
			}
			c.conflicts++
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// attemptLog records every request the clients made.
type attemptLog struct {
	mu       sync.Mutex
	attempts []cutAttempt
}

type cutAttempt struct {
	client     string
	start, end time.Time
	code       int
	err        error
}

func (l *attemptLog) try(client string, do func() error) error {
	start := time.Now()
	err := do()
	a := cutAttempt{client: client, start: start, end: time.Now(), err: err}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		a.code = int(status.Status().Code)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts = append(l.attempts, a)
	return err
}

func (l *attemptLog) all() []cutAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]cutAttempt(nil), l.attempts...)
}

// between are the attempts that started in [from, to).
func (l *attemptLog) between(from, to time.Time) []cutAttempt {
	var out []cutAttempt
	for _, a := range l.all() {
		if !a.start.Before(from) && a.start.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// firstSuccessAfter is when the first of client's requests that started
// after at succeeded.
func (l *attemptLog) firstSuccessAfter(client string, at time.Time) time.Time {
	for _, a := range l.all() {
		if a.client == client && a.err == nil && a.start.After(at) {
			return a.end
		}
	}
	return time.Time{}
}

// cutReason is the gist of a 503 during the cut, from the body the
// aggregator answered with: it tried and could not reach mydb, or it
// already held the APIService unavailable.
func cutReason(err error) string {
	msg := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, cause := range status.Status().Details.Causes {
			msg = cause.Message
		}
	}
	switch {
	case strings.Contains(msg, "connection reset"):
		return "mydb unreachable (connection reset)"
	case strings.Contains(msg, "service unavailable"):
		return "APIService unavailable"
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// availabilityChange is a change of the APIService's Available condition.
type availabilityChange struct {
	at        time.Time
	available bool
	why       string
}

// watchAvailability polls the APIService's Available condition every
// 250 ms until ctx ends; the function it returns tells when it changed.
func watchAvailability(ctx context.Context, t *testing.T) func() []availabilityChange {
	var changes []availabilityChange
	done := make(chan struct{})
	go func() {
		defer close(done)
		available := true
		for ctx.Err() == nil {
			err := apiServiceAvailable(t)
			if now := err == nil; now != available {
				c := availabilityChange{at: time.Now(), available: now}
				if err != nil {
					c.why = err.Error()
				}
				changes = append(changes, c)
				available = now
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	return func() []availabilityChange {
		<-done
		return changes
	}
}

func describeAvailability(changes []availabilityChange, cutAt, restoredAt time.Time) string {
	if len(changes) == 0 {
		return "Available throughout"
	}
	var parts []string
	for _, c := range changes {
		when := fmt.Sprintf("%s into the cut", c.at.Sub(cutAt).Round(10*time.Millisecond))
		if c.at.After(restoredAt) {
			when = fmt.Sprintf("%s after the cut", c.at.Sub(restoredAt).Round(10*time.Millisecond))
		}
		if c.available {
			parts = append(parts, "Available again "+when)
		} else {
			parts = append(parts, fmt.Sprintf("unavailable %s (%s)", when, c.why))
		}
	}
	return strings.Join(parts, "; ")
}
