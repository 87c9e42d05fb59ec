package mydatabase

import (
	"context"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// HealthWatcher streams an instance manager's health (GET /v1/health):
// *api.Client. A StatusReader that is not one (a test's fake) leaves the
// controller to its polls.
type HealthWatcher interface {
	WatchHealth(ctx context.Context, host string, auth api.Auth, seen func(api.Health)) error
}

// A broken health stream is opened again after healthRetry, and one that
// could not be opened after twice as long each time, up to
// healthRetryMax (a manager that is down, or too old to stream).
const (
	healthRetry    = time.Second
	healthRetryMax = 8 * time.Second
)

// healthWatches keeps one health stream open to each instance of the
// databases this controller leads, and makes the controller look at a
// database at once when one of its instances changes or is lost, instead
// of at its next poll. The polls stay the source of truth: a stream only
// says when to poll, and since when an instance has been lost (lostSince),
// so failoverDelay counts from the loss, not from the poll that saw it.
type healthWatches struct {
	client  HealthWatcher
	now     func() time.Time
	enqueue func(cache.ObjectName)
	// soon puts a database on the queue within the poll interval: for a
	// change a poll would have found as soon, but need not act on at once.
	soon func(cache.ObjectName)
	// lag records an instance's replication lag as its lines say it.
	lag func(db cache.ObjectName, pod string, h api.Health)

	mu  sync.Mutex
	ctx context.Context
	// byDB are each database's streams, by pod name.
	byDB map[cache.ObjectName]map[string]*healthWatch
}

// healthWatch is one pod's stream.
type healthWatch struct {
	address string
	uid     types.UID
	// credentials names the roots and identity the stream was opened
	// with: a CA rotation changes them, and the stream is opened anew.
	credentials string
	cancel      context.CancelFunc
	// lost is when the stream last broke or said the instance was not
	// ready, after it was last known ready (zero: not lost).
	lost time.Time
	// lineAt is when the last line came, and digest and position what it
	// said (api.Health).
	lineAt   time.Time
	digest   string
	position *api.Position
}

// start makes the streams live until ctx ends (the controller stops
// leading): they are opened from then on, and all closed then.
func (h *healthWatches) start(ctx context.Context) {
	h.mu.Lock()
	h.closeAll()
	h.ctx = ctx
	h.mu.Unlock()
	go func() {
		<-ctx.Done()
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.ctx == ctx { // not leading again already
			h.closeAll()
			h.ctx = nil
		}
	}()
}

// closeAll closes every stream; h.mu is held.
func (h *healthWatches) closeAll() {
	for _, pods := range h.byDB {
		for _, w := range pods {
			w.cancel()
		}
	}
	h.byDB = nil
}

// watch keeps a stream open to pod's manager at its address, as auth: a
// new one when the pod, its address or the credentials changed.
func (h *healthWatches) watch(db cache.ObjectName, pod *corev1.Pod, auth api.Auth) {
	if h.client == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		return
	}
	credentials := ""
	if auth.Credentials != nil {
		credentials = auth.Credentials.ID
	}
	w := h.byDB[db][pod.Name]
	if w != nil && w.address == pod.Status.PodIP && w.uid == pod.UID && w.credentials == credentials {
		return
	}
	if w != nil {
		w.cancel()
	}
	ctx, cancel := context.WithCancel(h.ctx)
	w = &healthWatch{address: pod.Status.PodIP, uid: pod.UID, credentials: credentials, cancel: cancel}
	if h.byDB == nil {
		h.byDB = map[cache.ObjectName]map[string]*healthWatch{}
	}
	if h.byDB[db] == nil {
		h.byDB[db] = map[string]*healthWatch{}
	}
	h.byDB[db][pod.Name] = w
	go h.run(ctx, db, pod.Name, w, auth)
}

// run reads w's stream, again and again until ctx ends.
func (h *healthWatches) run(ctx context.Context, db cache.ObjectName, pod string, w *healthWatch, auth api.Auth) {
	logger := klog.FromContext(ctx).WithValues("mydatabase", db.String(), "instance", pod)
	var (
		last *api.Health
		// lineAt is when the last line came.
		lineAt time.Time
	)
	retry := healthRetry
	for ctx.Err() == nil {
		err := h.client.WatchHealth(ctx, w.address, auth, func(health api.Health) {
			lineAt = h.now()
			h.sawLine(w, lineAt, health, last != nil && health.Role != last.Role)
			if h.lag != nil {
				h.lag(db, pod, health)
			}
			switch {
			case last == nil:
				if !health.Ready {
					h.enqueue(db)
				}
			case health.Changed(*last):
				h.enqueue(db)
			case health.Digest != last.Digest && h.soon != nil:
				h.soon(db)
			}
			last = &health
		})
		if ctx.Err() != nil {
			return
		}
		if last != nil {
			// It answered, and now it does not: look at once. It was
			// lost when its next line was due, if that is earlier than
			// now: a stream that went quiet is noticed only
			// api.HealthDeadline after its last line.
			logger.V(2).Info("health stream lost", "err", err)
			h.markLost(w, minTime(h.now(), lineAt.Add(api.HealthInterval)))
			h.enqueue(db)
			last, retry = nil, healthRetry
		} else {
			retry = min(2*retry, healthRetryMax)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// sawLine records what a line of w's stream said, at, under one lock (a
// controller at scale reads thousands of lines a second): a ready
// instance is not lost; an unready one is lost since this line, or since
// it was first lost, unless its role changed (a loss in its old role, a
// promotion's own unready moments, is not one in the new).
func (h *healthWatches) sawLine(w *healthWatch, at time.Time, health api.Health, roleChanged bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case health.Ready:
		w.lost = time.Time{}
	case roleChanged || w.lost.IsZero():
		w.lost = at
	}
	w.lineAt, w.digest = at, health.Digest
	if health.Position != nil {
		w.position = health.Position
	}
}

// markLost records that w's instance was lost at, unless it already was.
func (h *healthWatches) markLost(w *healthWatch, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.lost.IsZero() {
		w.lost = at
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// polled tells the streams what a poll of db found: an instance that
// answered ready is not lost, whatever its stream said; and the streams of
// pods no longer in pods are closed.
func (h *healthWatches) polled(db cache.ObjectName, pods []*corev1.Pod, ready map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := map[string]bool{}
	for _, p := range pods {
		keep[p.Name] = true
	}
	for name, w := range h.byDB[db] {
		switch {
		case !keep[name]:
			w.cancel()
			delete(h.byDB[db], name)
		case ready[name]:
			w.lost = time.Time{}
		}
	}
	if len(h.byDB[db]) == 0 {
		delete(h.byDB, db)
	}
}

// lostSince is when each of db's instances that its stream says is lost
// was lost.
func (h *healthWatches) lostSince(db cache.ObjectName) map[string]time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]time.Time
	for name, w := range h.byDB[db] {
		if w.lost.IsZero() {
			continue
		}
		if out == nil {
			out = map[string]time.Time{}
		}
		out[name] = w.lost
	}
	return out
}

// settled tells whether a poll of db's pods may wait for the resync
// interval: every pod's stream is live (a line within
// api.HealthDeadline) and digests its status, so any change of it puts
// the database on the queue by itself.
func (h *healthWatches) settled(db cache.ObjectName, pods []*corev1.Pod) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(pods) == 0 {
		return false
	}
	now := h.now()
	for _, p := range pods {
		w := h.byDB[db][p.Name]
		if w == nil || w.digest == "" || w.lineAt.IsZero() || now.Sub(w.lineAt) > api.HealthDeadline || !w.lost.IsZero() {
			return false
		}
	}
	return true
}

// positions are the last positions db's streams said, by pod: a poll that
// finds an instance gone takes its last position from here when its stream
// said one later than the last poll did (a replica lost with the primary
// may hold the last acknowledged commits).
func (h *healthWatches) positions(db cache.ObjectName) map[string]api.Position {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]api.Position
	for name, w := range h.byDB[db] {
		if w.position == nil {
			continue
		}
		if out == nil {
			out = map[string]api.Position{}
		}
		out[name] = *w.position
	}
	return out
}

// forgetPositions drops the positions db's streams said: its primary
// changed, and what they said relative to the old one is history.
func (h *healthWatches) forgetPositions(db cache.ObjectName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.byDB[db] {
		w.position = nil
	}
}
