// Package storeguard keeps mydb from serving an empty, replaced or
// rolled-back store as if it were the one the cluster knows.
//
// If mydb's etcd is wiped, swapped or restored from an older snapshot, its
// MyDatabases read as NotFound, and kube-controller-manager's garbage
// collector deletes every child that names one as owner. The guard prevents
// that: mydb keeps a marker in its own etcd (a random store UID and a
// sequence number) and a record of the same in the main cluster (a
// ConfigMap), and serves its resources only while the store's marker
// matches the record. While it does not, every request for mydb's
// resources is answered 503 with the reason, /readyz fails, and the
// controllers stand still, until an operator accepts the store through an
// annotation on the record.
//
// The sequence is advanced (in the store first, then in the record)
// whenever anything else was written to the store since the marker, so a
// snapshot older than the last advance holds a lower sequence than the
// record: a rollback. etcdutl's --bump-revision changes revisions, not
// values, so a bumped restore of an older snapshot is still caught.
//
// Between two checks the record lags the store by up to one interval: a
// snapshot taken in that time passes for current. Cover closes the gap for
// what matters most: the controllers cover a spec before they change the
// main cluster to follow it, so what the cluster was made from is never
// part of what a restore may silently lose.
package storeguard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
)

// AcceptAnnotation on the record accepts the store whose token it holds
// (Token), for when the store is meant to be the one it is: a restore from
// an older snapshot, or an empty store after etcd was lost for good.
const AcceptAnnotation = "mydb.example.com/accept-store"

// Event reasons on the record.
const (
	ReasonStoreMismatch = "StoreMismatch"
	ReasonStoreAccepted = "StoreAccepted"
	ReasonStoreRecorded = "StoreRecorded"
)

// Marker is what the store holds about itself.
type Marker struct {
	// UID names the store; it is made once, when mydb first finds both the
	// store and the record empty, or when an operator accepts an empty store.
	UID string `json:"uid"`
	// Sequence grows while the store is written to.
	Sequence int64 `json:"sequence"`
}

// LostRecord is the UID a record is made with when the record was found
// missing beside a store that holds a marker: no store matches it, so the
// store is refused until an operator accepts it. Recreating the record from
// the store would let anyone who may delete one ConfigMap (and restore an
// old snapshot) past the rollback check without the token.
const LostRecord = "lost"

// Token is what AcceptAnnotation must hold to accept the store holding m
// (nil: a store without marker).
func Token(m *Marker) string {
	if m == nil {
		return "empty"
	}
	return fmt.Sprintf("%s@%d", m.UID, m.Sequence)
}

// StoreState is one read of the store.
type StoreState struct {
	// Marker is nil when the store holds none.
	Marker *Marker
	// ModRevision is the revision the marker was last written at.
	ModRevision int64
	// Revision is the store's current revision.
	Revision int64
}

// Store is mydb's own etcd as the guard needs it.
type Store interface {
	Read(ctx context.Context) (StoreState, error)
	// Write puts m if the marker's revision is still modRevision (0: if
	// there is no marker), returning false when it is not.
	Write(ctx context.Context, m Marker, modRevision int64) (bool, error)
}

// Recorded is the record in the main cluster.
type Recorded struct {
	Marker
	// Accept is the AcceptAnnotation's value, "" when none.
	Accept string
	// ResourceVersion makes updates conflict-checked.
	ResourceVersion string
}

// Record is the object in the main cluster that remembers the store.
type Record interface {
	// Get returns nil when there is no record.
	Get(ctx context.Context) (*Recorded, error)
	Create(ctx context.Context, m Marker) error
	// Update writes m and drops AcceptAnnotation; it fails with a
	// conflict when the record changed since r was read.
	Update(ctx context.Context, r Recorded, m Marker) error
	// Event reports on the record.
	Event(eventType, reason, message string)
	// String names the record, e.g. ConfigMap mydb-system/mydb-store.
	String() string
	// KubectlArgs name the record on a kubectl command line, e.g.
	// "-n mydb-system configmap/mydb-store".
	KubectlArgs() string
}

// Guard decides whether mydb may serve its store. The zero state is
// "not verified": nothing is served before the first check passes.
type Guard struct {
	store  Store
	record Record
	// Interval is how often Run checks.
	Interval time.Duration

	mu sync.Mutex
	// verified is the marker the store held at the last passing check;
	// nil while the store is not verified.
	verified *Marker
	// problem says why not.
	problem string
	// reported is the last problem reported as an Event, so a problem that
	// lasts is reported once.
	reported string
	// changed is closed and replaced whenever verified turns nil or not.
	changed chan struct{}
	// coveredThrough is the highest store revision whose writes all came
	// before the marker the record names: a snapshot without one of them
	// holds a lower sequence than the record.
	coveredThrough int64
	// kick asks Run for a check now (Cover).
	kick chan struct{}
	// checked is closed and replaced at the end of every check.
	checked chan struct{}
}

// New returns a guard of store against record, not yet verified.
func New(store Store, record Record, interval time.Duration) *Guard {
	return &Guard{store: store, record: record, Interval: interval,
		problem: "mydb has not yet checked its storage against " + record.String(),
		changed: make(chan struct{}), kick: make(chan struct{}, 1), checked: make(chan struct{})}
}

// Run checks at once and then every Interval, or sooner when Cover asks,
// until ctx is done.
func (g *Guard) Run(ctx context.Context) {
	for {
		g.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		case <-time.After(g.Interval):
		}
	}
}

// Cover returns once the record names a marker written after revision (a
// store revision: an object's resourceVersion), asking Run for a check at
// once when it does not yet; the callers of a burst share that check. It
// fails while the store is not verified, or when ctx ends first.
func (g *Guard) Cover(ctx context.Context, revision int64) error {
	for {
		g.mu.Lock()
		covered, verified, checked := g.coveredThrough >= revision, g.verified != nil, g.checked
		g.mu.Unlock()
		switch {
		case covered:
			return nil
		case !verified:
			return g.Err()
		}
		select {
		case g.kick <- struct{}{}:
		default: // a check is asked for already
		}
		// The check under way may have read the store before revision:
		// then the next one covers it.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-checked:
		}
	}
}

// covered notes that the record names a marker written after every write
// up to revision.
func (g *Guard) covered(revision int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.coveredThrough = max(g.coveredThrough, revision)
}

// Err is nil while the store is verified, else a 503 saying why.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.verified != nil {
		return nil
	}
	return unavailable(g.problem)
}

// Verified tells whether the store is verified, and returns a channel
// closed at the next change of that.
func (g *Guard) Verified() (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verified != nil, g.changed
}

func unavailable(problem string) error {
	err := apierrors.NewServiceUnavailable(problem)
	err.ErrStatus.Details = nil
	return err
}

// Confirm re-reads the store's marker and fails when it no longer is the
// verified one (missing, another store, or an older sequence): the store
// changed under a running server. It is called after every read that may
// show objects as absent, so such a read is never answered before the
// guard had a look.
func (g *Guard) Confirm(ctx context.Context) error {
	g.mu.Lock()
	verified := g.verified
	g.mu.Unlock()
	if verified == nil {
		return g.Err()
	}
	state, err := g.store.Read(ctx)
	if err != nil {
		return unavailable(fmt.Sprintf("mydb cannot confirm its storage is the one %s names: %v", g.record, err))
	}
	if problem := compare(state.Marker, verified, "mydb's last check found"); problem != "" {
		g.trip(ctx, problem+g.acceptHint(state.Marker), true)
		return g.Err()
	}
	return nil
}

// compare says what is wrong with the store's marker against want, "" when
// nothing is; source says where want comes from ("the record ... names").
func compare(have, want *Marker, source string) string {
	switch {
	case want.UID == LostRecord:
		return fmt.Sprintf("the record of mydb's storage was deleted (made again, %s store %q): "+
			"mydb cannot tell whether its storage (%s) is the latest or was rolled back", source, LostRecord, Token(have))
	case have == nil:
		return fmt.Sprintf("mydb's storage holds no store identity, but %s store %s at sequence %d: "+
			"the storage is empty or was replaced", source, want.UID, want.Sequence)
	case have.UID != want.UID:
		return fmt.Sprintf("mydb's storage is store %s, but %s store %s: the storage was replaced",
			have.UID, source, want.UID)
	case have.Sequence < want.Sequence:
		return fmt.Sprintf("mydb's storage is store %s at sequence %d, but %s sequence %d: "+
			"the storage was rolled back (restored from an older snapshot?)", have.UID, have.Sequence, source, want.Sequence)
	}
	return ""
}

// Check compares the store with the record once, and advances both when
// the store was written to since its marker. The record is read first: the
// store's sequence is advanced before the record's, so a store read after
// the record is never behind it unless it was rolled back.
func (g *Guard) Check(ctx context.Context) {
	defer func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		close(g.checked)
		g.checked = make(chan struct{})
	}()
	logger := klog.FromContext(ctx)
	rec, err := g.record.Get(ctx)
	if err != nil {
		// The main cluster is out of reach: the store stays as verified (or
		// not) as it was.
		logger.Error(err, "Cannot read the store record; keeping the guard's state", "record", g.record.String())
		return
	}
	state, err := g.store.Read(ctx)
	if err != nil {
		// The store may be being swapped: nothing is served until it is
		// verified again.
		g.trip(ctx, fmt.Sprintf("mydb cannot read its storage's identity: %v", err), false)
		return
	}
	switch {
	case rec == nil && state.Marker == nil:
		g.initialize(ctx, state)
	case rec == nil:
		// The record was deleted: nothing says the store is the latest. It
		// is made again as lost, which no store matches, so that an
		// operator can accept the store on it.
		if err := g.record.Create(ctx, Marker{UID: LostRecord}); err != nil && !apierrors.IsAlreadyExists(err) {
			g.trip(ctx, fmt.Sprintf("mydb cannot write %s: %v", g.record, err), false)
			return
		}
		g.trip(ctx, compare(state.Marker, &Marker{UID: LostRecord}, "the record "+g.record.String()+" names")+g.acceptHint(state.Marker), true)
	default:
		problem := compare(state.Marker, &rec.Marker, "the record "+g.record.String()+" names")
		switch {
		case problem == "":
			// An acceptance of a store that needs none changes nothing.
			g.pass(ctx, state)
			if rec.Sequence == state.Marker.Sequence {
				g.covered(state.ModRevision)
			}
			g.advance(ctx, rec, state)
		case rec.Accept != "":
			g.accept(ctx, rec, state)
		default:
			g.trip(ctx, problem+g.acceptHint(state.Marker), true)
		}
	}
}

// acceptHint tells the operator how to accept the store holding m.
func (g *Guard) acceptHint(m *Marker) string {
	return fmt.Sprintf("; if this storage is meant to be the one, accept it: kubectl annotate %s %s=%s --overwrite (docs/operations.md)",
		g.record.KubectlArgs(), AcceptAnnotation, Token(m))
}

// initialize gives a new store its identity: neither it nor the record
// knows of any.
func (g *Guard) initialize(ctx context.Context, state StoreState) {
	m := Marker{UID: uuid.NewString(), Sequence: 1}
	if ok, err := g.store.Write(ctx, m, 0); err != nil || !ok {
		g.trip(ctx, fmt.Sprintf("mydb cannot write its storage's identity (written: %t): %v", ok, err), false)
		return
	}
	if err := g.record.Create(ctx, m); err != nil {
		g.trip(ctx, fmt.Sprintf("mydb cannot write %s: %v", g.record, err), false)
		return
	}
	g.record.Event("Normal", ReasonStoreRecorded, fmt.Sprintf("Recorded new store %s", m.UID))
	klog.FromContext(ctx).Info("Recorded a new store", "uid", m.UID, "record", g.record.String())
	g.pass(ctx, StoreState{Marker: &m})
	g.covered(state.Revision)
}

// accept makes the store the recorded one, when the annotation names it.
func (g *Guard) accept(ctx context.Context, rec *Recorded, state StoreState) {
	if rec.Accept != Token(state.Marker) {
		g.trip(ctx, fmt.Sprintf("%s accepts the store %q, but mydb's storage is %q: the annotation %s must name the storage as it is",
			g.record, rec.Accept, Token(state.Marker), AcceptAnnotation), true)
		return
	}
	// The accepted store continues beyond both sequences, so no snapshot
	// taken before can pass for it.
	m := Marker{UID: uuid.NewString(), Sequence: rec.Sequence + 1}
	if state.Marker != nil {
		m = Marker{UID: state.Marker.UID, Sequence: max(state.Marker.Sequence, rec.Sequence) + 1}
	}
	if ok, err := g.store.Write(ctx, m, state.ModRevision); err != nil || !ok {
		g.trip(ctx, fmt.Sprintf("mydb cannot write its storage's identity (written: %t): %v", ok, err), false)
		return
	}
	if err := g.record.Update(ctx, *rec, m); err != nil {
		g.trip(ctx, fmt.Sprintf("mydb cannot write %s: %v", g.record, err), false)
		return
	}
	msg := fmt.Sprintf("Accepted store %s (was %s) at sequence %d", m.UID, Token(state.Marker), m.Sequence)
	g.record.Event("Normal", ReasonStoreAccepted, msg)
	klog.FromContext(ctx).Info(msg, "record", g.record.String())
	g.pass(ctx, StoreState{Marker: &m})
	g.covered(state.Revision)
}

// advance moves the sequence on when the store was written to since the
// marker (its revision is past the marker's): a snapshot taken before
// holds what the cluster may since have relied on.
func (g *Guard) advance(ctx context.Context, rec *Recorded, state StoreState) {
	if state.Revision <= state.ModRevision {
		return
	}
	m := Marker{UID: state.Marker.UID, Sequence: state.Marker.Sequence + 1}
	ok, err := g.store.Write(ctx, m, state.ModRevision)
	if err != nil || !ok {
		// Another replica advanced it, or the store is unreachable: the
		// next check sees which.
		return
	}
	g.pass(ctx, StoreState{Marker: &m})
	if err := g.record.Update(ctx, *rec, m); err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot advance the record; the next check retries", "err", err)
		return
	}
	// The marker was written after the store was at state.Revision.
	g.covered(state.Revision)
}

func (g *Guard) pass(ctx context.Context, state StoreState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.verified != nil
	m := *state.Marker
	g.verified, g.problem, g.reported = &m, "", ""
	if !was {
		klog.FromContext(ctx).Info("mydb's storage is verified", "uid", m.UID, "sequence", m.Sequence, "record", g.record.String())
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// trip stops serving the store for problem; a mismatch (rather than an
// outage) is also reported as a Warning Event on the record, once.
func (g *Guard) trip(ctx context.Context, problem string, mismatch bool) {
	g.mu.Lock()
	was := g.verified != nil
	g.verified, g.problem = nil, problem
	// Another store's revisions say nothing of this one's.
	g.coveredThrough = 0
	report := mismatch && problem != g.reported
	if mismatch {
		g.reported = problem
	}
	if was {
		close(g.changed)
		g.changed = make(chan struct{})
	}
	g.mu.Unlock()
	if report {
		klog.FromContext(ctx).Error(nil, "mydb does not serve its storage", "reason", problem)
		g.record.Event("Warning", ReasonStoreMismatch, problem)
	} else if was {
		klog.FromContext(ctx).Error(nil, "mydb stops serving its storage until it is verified again", "reason", problem)
	}
}
