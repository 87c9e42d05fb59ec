//go:build e2e && faults

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"sort"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestRollingRestartsMissNoWatchEvent restarts mydb-apiserver replica by
// replica, as a Deployment of two with maxSurge 1 and maxUnavailable 0
// rolls out (mydbService: a TCP proxy of the test's own where the
// aggregator dials, in front of the replicas), while 20 clients work
// through the aggregator: 8 writers create MyDatabases and merge-patch
// them, 6 listers list the namespace, 6 watchers follow it with a
// reflector's semantics (list, then watch from the last resourceVersion
// seen, bookmarks included; resume where a watch ends; relist on 410
// Gone). Every acknowledged create and patch is recorded with its
// resourceVersion. It asserts: no request failed with anything but a 429
// or 503, which the clients retry; every watcher saw every acknowledged
// write, as the event with its resourceVersion or in a relist that covers
// it, and every watcher's resourceVersions only grew; every list held
// every create acknowledged before it started, and a lister's list
// resourceVersions never went back.
//
// 3 restarts; MYDB_E2E_LONG=1 runs 10.
func TestRollingRestartsMissNoWatchEvent(t *testing.T) {
	restarts, creates := 3, 4
	if os.Getenv("MYDB_E2E_LONG") == "1" {
		restarts, creates = 10, 8
	}
	const writers, listers, watchers = 8, 6, 6
	// The kubelet's default terminationGracePeriodSeconds is 30; mydb
	// holds watches the controller manager opened through the aggregator
	// for up to its request timeout before it exits, and local-up gives it
	// 10 s.
	const grace = 10 * time.Second

	svc := startMydbService(t, 2)
	ns := newNamespace(t)
	codes := &responseCodes{byCode: map[int]int{}}
	cfg := restConfig(t)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WrapTransport = codes.wrap
	requests := rest.CopyConfig(cfg)
	requests.Timeout = 30 * time.Second
	dbs := mydbClient(t, requests).ExampleV1().MyDatabases(ns)
	// Watches last as long as they are asked to (timeoutSeconds).
	watchDBs := mydbClient(t, cfg).ExampleV1().MyDatabases(ns)

	rec := &rollRecord{errors: map[string]int{}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var watchersDone, othersDone sync.WaitGroup
	ws := make([]*reflectorWatcher, watchers)
	for i := range ws {
		ws[i] = &reflectorWatcher{seen: map[string]bool{}}
		watchersDone.Add(1)
		go func(w *reflectorWatcher) {
			defer watchersDone.Done()
			w.run(watchDBs, rec)
		}(ws[i])
	}
	ls := make([]*rollLister, listers)
	for i := range ls {
		ls[i] = &rollLister{}
		othersDone.Add(1)
		go func(l *rollLister) {
			defer othersDone.Done()
			l.run(ctx, dbs, rec)
		}(ls[i])
	}
	for w := 0; w < writers; w++ {
		othersDone.Add(1)
		go func(w int) {
			defer othersDone.Done()
			runRollWriter(ctx, dbs, w, creates, rec)
		}(w)
	}

	time.Sleep(3 * time.Second)
	var rolls []rollout
	for i := 0; i < restarts; i++ {
		ro := svc.roll(grace)
		rolls = append(rolls, ro)
		t.Logf("restart %d: %s replaced by %s: ready and in rotation %s after it started; %s exited %s after SIGTERM%s",
			i+1, ro.old, ro.new, ro.newReady.Sub(ro.started).Round(10*time.Millisecond), ro.old,
			ro.oldExited.Sub(ro.oldRemoved).Round(10*time.Millisecond), map[bool]string{true: " (killed at the grace period)"}[ro.oldKilled])
		time.Sleep(2 * time.Second)
	}
	time.Sleep(3 * time.Second)
	stop()
	othersDone.Wait()

	// The watchers go on until they have caught up with the last
	// acknowledged write, or give up after 30 s.
	last := rec.lastRV()
	catchUp, cancelCatchUp := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelCatchUp()
	for _, w := range ws {
		w.stopAt(catchUp, last)
	}
	watchersDone.Wait()

	// Every watcher saw every acknowledged write, in order.
	writes := rec.acked()
	for i, w := range ws {
		missed := w.missed(writes)
		if len(missed) > 0 {
			t.Errorf("watcher %d missed %d of %d acknowledged writes: %v", i, len(missed), len(writes), firstTen(missed))
		}
		if len(w.outOfOrder) > 0 {
			t.Errorf("watcher %d saw resourceVersions go back: %v", i, firstTen(w.outOfOrder))
		}
	}
	for i, l := range ls {
		if len(l.missing) > 0 {
			t.Errorf("lister %d: lists without creates acknowledged before they started: %v", i, firstTen(l.missing))
		}
		if len(l.wentBack) > 0 {
			t.Errorf("lister %d: list resourceVersions went back: %v", i, firstTen(l.wentBack))
		}
	}
	for kind, n := range rec.errors {
		if !strings.HasPrefix(kind, "429 ") && !strings.HasPrefix(kind, "503 ") {
			t.Errorf("%d requests failed with %s, which a client does not retry", n, kind)
		}
	}
	for i, ro := range rolls {
		if ro.proxyDialFailures > 0 {
			t.Errorf("restart %d: the proxy could not reach a replica in rotation %d times", i+1, ro.proxyDialFailures)
		}
	}
	reportRolls(t, rolls, rec, ws, ls, codes)
}

// ackedRV is one acknowledged write: the object's resourceVersion it
// answered with. An ambiguous create answered 503 and then, retried, 409
// AlreadyExists: it landed, at a resourceVersion the client was not told.
type ackedRV struct {
	name, rv  string
	create    bool
	ambiguous bool
}

// rollRecord is what the clients were told.
type rollRecord struct {
	mu              sync.Mutex
	writes          []ackedRV
	creates         []string // acknowledged creates, in order
	patches         int
	errors          map[string]int // failures the clients saw, by code and reason
	retriedAttempts int
	failedAt        []time.Time
	ambiguous       int
}

func (r *rollRecord) ack(w ackedRV) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, w)
	if w.create {
		r.creates = append(r.creates, w.name)
		if w.ambiguous {
			r.ambiguous++
		}
	} else {
		r.patches++
	}
}

func (r *rollRecord) acked() []ackedRV {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ackedRV(nil), r.writes...)
}

// createsSoFar are the creates acknowledged until now.
func (r *rollRecord) createsSoFar() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.creates[:len(r.creates):len(r.creates)]
}

func (r *rollRecord) lastRV() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last int64
	for _, w := range r.writes {
		if n, _ := strconv.ParseInt(w.rv, 10, 64); n > last {
			last = n
		}
	}
	return last
}

// failed counts a failed request; it tells whether the client retries it
// (429 and 503).
func (r *rollRecord) failed(err error) bool {
	code := 0
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	}
	msg := err.Error()
	if status != nil && status.Status().Details != nil {
		// A body that is no Status (the aggregator's own errors) is here.
		for _, cause := range status.Status().Details.Causes {
			msg = cause.Message
		}
	}
	if len(msg) > 120 {
		msg = msg[:120]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[fmt.Sprintf("%d %s", code, msg)]++
	r.failedAt = append(r.failedAt, time.Now())
	retry := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
	if retry {
		r.retriedAttempts++
	}
	return retry
}

// retryOn429or503 runs do until it succeeds, fails with what a client does not
// retry, or ctx ends; it reports every attempt to attempt.
func retryOn429or503(ctx context.Context, rec *rollRecord, attempt func(start time.Time, err error), do func() error) error {
	for {
		start := time.Now()
		err := do()
		if attempt != nil {
			attempt(start, err)
		}
		if err == nil || (ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			return err
		}
		if !rec.failed(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runRollWriter creates perWriter MyDatabases, one every few writes, and
// merge-patches a random one of them otherwise, until ctx ends.
func runRollWriter(ctx context.Context, dbs typedv1.MyDatabaseInterface, w, perWriter int, rec *rollRecord) {
	rng := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
	var mine []string
	seq := 0
	for i := 0; ctx.Err() == nil; i++ {
		if len(mine) < perWriter && (len(mine) == 0 || i%5 == 0) {
			name := fmt.Sprintf("roll-%d-%02d", w, len(mine))
			db := &examplev1.MyDatabase{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi"), Replicas: ptr.To[int32](1)},
			}
			retried := false
			var got *examplev1.MyDatabase
			err := retryOn429or503(ctx, rec, func(_ time.Time, err error) { retried = retried || err != nil }, func() (err error) {
				got, err = dbs.Create(context.Background(), db, metav1.CreateOptions{})
				return err
			})
			switch {
			case err == nil:
				rec.ack(ackedRV{name: name, rv: got.ResourceVersion, create: true})
				mine = append(mine, name)
			case retried && apierrors.IsAlreadyExists(err):
				// An earlier attempt landed; its answer was lost.
				rec.ack(ackedRV{name: name, create: true, ambiguous: true})
				mine = append(mine, name)
			}
		} else if len(mine) > 0 {
			name := mine[rng.Intn(len(mine))]
			seq++
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d-%d"}}}`, seqAnnotation, w, seq)
			var got *examplev1.MyDatabase
			err := retryOn429or503(ctx, rec, nil, func() (err error) {
				got, err = dbs.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			})
			if err == nil {
				rec.ack(ackedRV{name: name, rv: got.ResourceVersion})
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rollLister lists the namespace in a loop.
type rollLister struct {
	lists    int
	missing  []string // creates acknowledged before a list began, not in it
	wentBack []string
	attempts []listAttempt
}

type listAttempt struct {
	start, end time.Time
	ok         bool
}

func (l *rollLister) run(ctx context.Context, dbs typedv1.MyDatabaseInterface, rec *rollRecord) {
	var lastRV int64
	for ctx.Err() == nil {
		before := rec.createsSoFar()
		var list *examplev1.MyDatabaseList
		err := retryOn429or503(ctx, rec, func(start time.Time, err error) {
			l.attempts = append(l.attempts, listAttempt{start: start, end: time.Now(), ok: err == nil})
		}, func() (err error) {
			list, err = dbs.List(context.Background(), metav1.ListOptions{})
			return err
		})
		if err != nil {
			continue
		}
		l.lists++
		have := map[string]bool{}
		for _, db := range list.Items {
			have[db.Name] = true
		}
		for _, name := range before {
			if !have[name] {
				l.missing = append(l.missing, fmt.Sprintf("%s (list at rv %s)", name, list.ResourceVersion))
			}
		}
		rv, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
		if rv < lastRV {
			l.wentBack = append(l.wentBack, fmt.Sprintf("%d after %d", rv, lastRV))
		}
		lastRV = rv
		time.Sleep(100 * time.Millisecond)
	}
}

// reflectorWatcher follows a namespace as client-go's reflector does.
type reflectorWatcher struct {
	mu         sync.Mutex
	seen       map[string]bool // name@resourceVersion of every event
	lists      []relist
	last       int64 // the resourceVersion it is at
	events     int
	resumes    int // watches that ended and were resumed from the last resourceVersion
	endedBy    map[string]int
	outOfOrder []string
	until      int64 // once at this resourceVersion, after stopAt, it stops
	untilCtx   context.Context
}

// relist is one list: the position it started from (the resourceVersion
// the watcher was at, whose events after it it may have lost) and what it
// held.
type relist struct {
	from, rv int64
	items    map[string]int64
}

// stopAt makes the watcher stop once it is at rv, or when ctx ends.
func (w *reflectorWatcher) stopAt(ctx context.Context, rv int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.until, w.untilCtx = rv, ctx
}

func (w *reflectorWatcher) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.untilCtx != nil && (w.last >= w.until || w.untilCtx.Err() != nil)
}

func (w *reflectorWatcher) run(dbs typedv1.MyDatabaseInterface, rec *rollRecord) {
	w.endedBy = map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for !w.done() {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for ctx.Err() == nil {
		var list *examplev1.MyDatabaseList
		if err := retryOn429or503(ctx, rec, nil, func() (err error) {
			list, err = dbs.List(ctx, metav1.ListOptions{})
			return err
		}); err != nil {
			continue
		}
		l := relist{from: w.last, rv: mustRV(list.ResourceVersion), items: map[string]int64{}}
		for _, db := range list.Items {
			l.items[db.Name] = mustRV(db.ResourceVersion)
		}
		w.mu.Lock()
		w.lists = append(w.lists, l)
		if l.rv < w.last {
			w.outOfOrder = append(w.outOfOrder, fmt.Sprintf("list at %d after %d", l.rv, w.last))
		}
		w.last = l.rv
		w.mu.Unlock()
		if !w.watch(ctx, dbs, rec, rng) {
			return
		}
	}
}

// watch watches from the last resourceVersion, resuming whenever a watch
// ends, until it is told 410 Gone (it returns true: relist) or ctx ends.
func (w *reflectorWatcher) watch(ctx context.Context, dbs typedv1.MyDatabaseInterface, rec *rollRecord, rng *rand.Rand) bool {
	for ctx.Err() == nil {
		// A reflector asks for 5 to 10 minutes; shorter here, so that
		// watches also end the ordinary way during the test.
		timeout := int64(30 + rng.Intn(30))
		wi, err := dbs.Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(w.last, 10),
			AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			rec.failed(err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ended := "closed"
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					wi.Stop()
					w.mu.Lock()
					w.endedBy["410 Gone: relist"]++
					w.mu.Unlock()
					return true
				}
				ended = "error event: " + err.Error()
				if len(ended) > 100 {
					ended = ended[:100]
				}
				break
			}
			db, ok := ev.Object.(*examplev1.MyDatabase)
			if !ok {
				continue
			}
			rv := mustRV(db.ResourceVersion)
			w.mu.Lock()
			if ev.Type == watch.Bookmark {
				if rv < w.last {
					w.outOfOrder = append(w.outOfOrder, fmt.Sprintf("bookmark %d after %d", rv, w.last))
				}
			} else {
				if rv <= w.last {
					w.outOfOrder = append(w.outOfOrder, fmt.Sprintf("%s %s@%d after %d", ev.Type, db.Name, rv, w.last))
				}
				w.seen[fmt.Sprintf("%s@%d", db.Name, rv)] = true
				w.events++
			}
			w.last = rv
			w.mu.Unlock()
		}
		wi.Stop()
		if ctx.Err() == nil {
			w.mu.Lock()
			w.resumes++
			w.endedBy[ended]++
			w.mu.Unlock()
		}
	}
	return false
}

// missed are the acknowledged writes the watcher neither saw as an event
// nor got in a relist that covers them: one that started before the write
// and holds the object at its resourceVersion or later.
func (w *reflectorWatcher) missed(writes []ackedRV) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, wr := range writes {
		if wr.ambiguous {
			// Its resourceVersion is unknown: any sight of it will do.
			if !w.sawName(wr.name) {
				out = append(out, wr.name+" (ambiguous create)")
			}
			continue
		}
		rv := mustRV(wr.rv)
		if w.seen[fmt.Sprintf("%s@%d", wr.name, rv)] {
			continue
		}
		covered := false
		for _, l := range w.lists {
			if l.from < rv && rv <= l.rv && l.items[wr.name] >= rv {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, fmt.Sprintf("%s@%d", wr.name, rv))
		}
	}
	return out
}

func (w *reflectorWatcher) sawName(name string) bool {
	for k := range w.seen {
		if strings.HasPrefix(k, name+"@") {
			return true
		}
	}
	for _, l := range w.lists {
		if _, ok := l.items[name]; ok {
			return true
		}
	}
	return false
}

// firstTen is up to the first 10 of ss.
func firstTen(ss []string) []string {
	if len(ss) > 10 {
		return ss[:10]
	}
	return ss
}

func mustRV(rv string) int64 {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("resourceVersion %q: %v", rv, err))
	}
	return n
}

// responseCodes counts every HTTP response the clients got by status
// code, the ones client-go retried itself (429 with Retry-After) too, and
// requests that got no response.
type responseCodes struct {
	mu         sync.Mutex
	byCode     map[int]int
	noResponse int
}

func (c *responseCodes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.noResponse++
		} else {
			c.byCode[resp.StatusCode]++
		}
		return resp, err
	})
}

func (c *responseCodes) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var codes []int
	for code := range c.byCode {
		codes = append(codes, code)
	}
	sort.Ints(codes)
	var parts []string
	for _, code := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", code, c.byCode[code]))
	}
	if c.noResponse > 0 {
		parts = append(parts, fmt.Sprintf("no response: %d", c.noResponse))
	}
	return strings.Join(parts, ", ")
}

// listersUnavailable is the longest time the listers went without a successful
// list in [from, to]: from a failed attempt's start to the end of the next
// successful one.
func listersUnavailable(ls []*rollLister, from, to time.Time) time.Duration {
	var longest time.Duration
	for _, l := range ls {
		var failingSince time.Time
		for _, a := range l.attempts {
			if a.end.Before(from) || a.start.After(to) {
				continue
			}
			switch {
			case !a.ok && failingSince.IsZero():
				failingSince = a.start
			case a.ok && !failingSince.IsZero():
				if d := a.end.Sub(failingSince); d > longest {
					longest = d
				}
				failingSince = time.Time{}
			}
		}
	}
	return longest
}

func reportRolls(t *testing.T, rolls []rollout, rec *rollRecord, ws []*reflectorWatcher, ls []*rollLister, codes *responseCodes) {
	t.Helper()
	var startups, exits, outages []time.Duration
	killed := 0
	// Each failure goes with the last SIGTERM before it.
	rec.mu.Lock()
	after := make([][]string, len(rolls))
	before := 0
	for _, at := range rec.failedAt {
		last := -1
		for i, ro := range rolls {
			if !ro.oldRemoved.After(at) {
				last = i
			}
		}
		if last < 0 {
			before++
			continue
		}
		after[last] = append(after[last], at.Sub(rolls[last].oldRemoved).Round(10*time.Millisecond).String())
	}
	for i, offsets := range after {
		if len(offsets) > 0 {
			t.Logf("restart %d: %d failed requests, at these times after the old replica's SIGTERM: %v", i+1, len(offsets), offsets)
		}
	}
	if before > 0 {
		t.Logf("%d failed requests before the first SIGTERM", before)
	}
	rec.mu.Unlock()
	for _, ro := range rolls {
		startups = append(startups, ro.newReady.Sub(ro.started))
		exits = append(exits, ro.oldExited.Sub(ro.oldRemoved))
		outages = append(outages, listersUnavailable(ls, ro.started, ro.oldExited.Add(5*time.Second)))
		if ro.oldKilled {
			killed++
		}
	}
	rec.mu.Lock()
	t.Logf("FIGURES: %d rolling restarts; %d acknowledged creates (%d ambiguous: 503, then 409 on the retry), %d acknowledged patches",
		len(rolls), len(rec.creates), rec.ambiguous, rec.patches)
	t.Logf("FIGURES: client-visible failures %d (all retried: %v)", rec.retriedAttempts, rec.errors)
	rec.mu.Unlock()
	t.Logf("FIGURES: HTTP responses by code (client-go's own retries included): %s", codes)
	lists := 0
	for _, l := range ls {
		lists += l.lists
	}
	t.Logf("FIGURES: %d lists by %d listers; unavailable to the listers per restart: %v", lists, len(ls), outages)
	for i, w := range ws {
		w.mu.Lock()
		t.Logf("FIGURES: watcher %d: %d events, %d lists (1 initial, %d after 410 Gone), %d watches resumed; ends: %v",
			i, w.events, len(w.lists), len(w.lists)-1, w.resumes, w.endedBy)
		w.mu.Unlock()
	}
	t.Logf("FIGURES: new replica ready in p50 %s max %s; old replica exited after SIGTERM in p50 %s max %s (%d killed at the grace period)",
		stats.Percentile(startups, 50), stats.Percentile(startups, 100), stats.Percentile(exits, 50), stats.Percentile(exits, 100), killed)
}
