package storeguard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// memStore is an etcd of one key: every write, the marker's or anyone
// else's, moves the revision on.
type memStore struct {
	mu          sync.Mutex
	marker      *Marker
	modRevision int64
	revision    int64
	err         error
}

func (s *memStore) Read(context.Context) (StoreState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return StoreState{}, s.err
	}
	state := StoreState{Revision: s.revision, ModRevision: s.modRevision}
	if s.marker != nil {
		m := *s.marker
		state.Marker = &m
	}
	return state, nil
}

func (s *memStore) Write(_ context.Context, m Marker, modRevision int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, s.err
	}
	if s.modRevision != modRevision {
		return false, nil
	}
	s.revision++
	s.marker, s.modRevision = &m, s.revision
	return true, nil
}

// otherWrite is a write of some resource.
func (s *memStore) otherWrite() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revision++
}

// snapshot and restore copy the whole store; bump moves the revision on as
// etcdutl's --bump-revision does.
func (s *memStore) snapshot() *memStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &memStore{marker: s.marker, modRevision: s.modRevision, revision: s.revision}
}

func (s *memStore) restore(from *memStore, bump int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marker, s.modRevision, s.revision = from.marker, from.modRevision, from.revision+bump
}

func (s *memStore) wipe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marker, s.modRevision, s.revision = nil, 0, 1
}

type rig struct {
	store    *memStore
	client   *fake.Clientset
	recorder *record.FakeRecorder
	record   ConfigMapRecord
}

func newRig() *rig {
	r := &rig{store: &memStore{revision: 1}, client: fake.NewSimpleClientset(), recorder: record.NewFakeRecorder(100)}
	r.record = ConfigMapRecord{Client: r.client, Namespace: "mydb-system", Name: "mydb-store", Recorder: r.recorder}
	return r
}

func (r *rig) guard() *Guard { return New(r.store, r.record, time.Second) }

func (r *rig) recorded(t *testing.T) *Recorded {
	t.Helper()
	rec, err := r.record.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (r *rig) annotate(t *testing.T, value string) {
	t.Helper()
	cm, err := r.client.CoreV1().ConfigMaps("mydb-system").Get(context.Background(), "mydb-store", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{AcceptAnnotation: value}
	if _, err := r.client.CoreV1().ConfigMaps("mydb-system").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) events() []string {
	var out []string
	for {
		select {
		case e := <-r.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func mustServe(t *testing.T, g *Guard) {
	t.Helper()
	if err := g.Err(); err != nil {
		t.Fatalf("the guard refuses a good store: %v", err)
	}
}

func mustRefuse(t *testing.T, g *Guard, want ...string) {
	t.Helper()
	err := g.Err()
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("the guard must refuse with 503, got %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q does not say %q", err, w)
		}
	}
}

func TestNothingIsServedBeforeTheFirstCheck(t *testing.T) {
	g := newRig().guard()
	mustRefuse(t, g, "not yet checked")
	if ok, _ := g.Verified(); ok {
		t.Fatal("a guard that never checked may not be verified")
	}
}

func TestFirstStartRecordsANewStoreAndARestartKeepsIt(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	mustServe(t, g)
	rec := r.recorded(t)
	if rec == nil || rec.UID == "" || rec.UID != r.store.marker.UID {
		t.Fatalf("record %+v does not name the store's marker %+v", rec, r.store.marker)
	}

	// A restart (a new guard) finds the same store.
	again := r.guard()
	again.Check(ctx)
	mustServe(t, again)
	if r.recorded(t).UID != rec.UID {
		t.Fatalf("a restart made a new store identity")
	}
}

func TestAWipedStoreIsRefusedUntilAccepted(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	_, changed := g.Verified()
	recorded := r.recorded(t).UID
	r.events()

	r.store.wipe()
	g.Check(ctx)
	mustRefuse(t, g, "holds no store identity", "empty or was replaced", recorded,
		"kubectl annotate -n mydb-system configmap/mydb-store "+AcceptAnnotation+"=empty --overwrite")
	select {
	case <-changed:
	default:
		t.Fatal("tripping must signal the controllers")
	}
	g.Check(ctx)
	if events := r.events(); len(events) != 1 || !strings.Contains(events[0], "Warning "+ReasonStoreMismatch) {
		t.Fatalf("a lasting mismatch must be reported once, as a Warning: %q", events)
	}
	// A fresh guard (mydb restarted on the empty store) refuses it too,
	// and does not make it a new identity.
	fresh := r.guard()
	fresh.Check(ctx)
	mustRefuse(t, fresh, "holds no store identity")
	if r.store.marker != nil {
		t.Fatal("the guard wrote an identity into a store it refused")
	}

	// Accepting with the wrong token keeps it refused.
	r.annotate(t, "some-uid@3")
	g.Check(ctx)
	mustRefuse(t, g, `accepts the store "some-uid@3"`, `storage is "empty"`)

	r.events()
	r.annotate(t, "empty")
	g.Check(ctx)
	mustServe(t, g)
	rec := r.recorded(t)
	if rec.Accept != "" || rec.UID == recorded || rec.UID != r.store.marker.UID {
		t.Fatalf("after acceptance the record %+v must name the new store %+v without the annotation", rec, r.store.marker)
	}
	if events := r.events(); len(events) != 1 || !strings.Contains(events[0], ReasonStoreAccepted) {
		t.Fatalf("acceptance must be reported: %q", events)
	}
}

func TestAnotherStoreIsRefused(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	r.guard().Check(ctx)
	recorded := r.recorded(t).UID
	r.store.marker = &Marker{UID: "other", Sequence: 40}
	g := r.guard()
	g.Check(ctx)
	mustRefuse(t, g, "storage is store other", "names store "+recorded, "replaced", AcceptAnnotation+"=other@40")
}

func TestARollbackIsRefusedEvenWithABumpedRevision(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	old := r.store.snapshot()

	// Writes after the snapshot advance the sequence, in the store and
	// in the record.
	r.store.otherWrite()
	g.Check(ctx)
	if got := r.recorded(t).Sequence; got != old.marker.Sequence+1 || r.store.marker.Sequence != got {
		t.Fatalf("after a write the record's sequence is %d and the store's %d, want %d", got, r.store.marker.Sequence, old.marker.Sequence+1)
	}
	// An idle store is not advanced (so a snapshot of it restores cleanly).
	g.Check(ctx)
	if got := r.recorded(t).Sequence; got != old.marker.Sequence+1 {
		t.Fatalf("an idle store advanced to %d", got)
	}

	r.store.restore(old, 1_000_000_000)
	fresh := r.guard()
	fresh.Check(ctx)
	mustRefuse(t, fresh, "rolled back", "at sequence 1, but the record ConfigMap mydb-system/mydb-store names sequence 2",
		AcceptAnnotation+"="+Token(old.marker))

	r.annotate(t, Token(old.marker))
	fresh.Check(ctx)
	mustServe(t, fresh)
	if got := r.store.marker; got.UID != old.marker.UID || got.Sequence != 3 {
		t.Fatalf("the accepted store's marker is %+v, want the same store at sequence 3", got)
	}
}

func TestARestoreOfTheLatestStateNeedsNoAcceptance(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	r.store.otherWrite()
	g.Check(ctx)
	latest := r.store.snapshot()
	r.store.wipe()
	g.Check(ctx)
	mustRefuse(t, g, "holds no store identity")

	r.store.restore(latest, 1_000_000_000)
	g.Check(ctx)
	mustServe(t, g)
}

func TestConfirmCatchesAStoreSwappedBetweenChecks(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	if err := g.Confirm(ctx); err != nil {
		t.Fatalf("Confirm refuses the verified store: %v", err)
	}
	r.store.otherWrite()
	if err := g.Confirm(ctx); err != nil {
		t.Fatalf("Confirm refuses the verified store after a write: %v", err)
	}
	_, changed := g.Verified()
	r.store.wipe()
	if err := g.Confirm(ctx); !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "holds no store identity") ||
		!strings.Contains(err.Error(), AcceptAnnotation+"=empty") {
		t.Fatalf("Confirm on a wiped store: %v, want 503 saying why", err)
	}
	mustRefuse(t, g, "holds no store identity")
	select {
	case <-changed:
	default:
		t.Fatal("Confirm's trip must signal the controllers")
	}
}

func TestOutages(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)

	// The main cluster out of reach says nothing about the store: it stays
	// served.
	broken := true
	r.client.PrependReactor("get", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return broken, nil, errors.New("connection refused")
	})
	g.Check(ctx)
	mustServe(t, g)
	broken = false

	// The store out of reach may be being swapped: nothing is served until
	// it was read again.
	r.store.err = errors.New("context deadline exceeded")
	g.Check(ctx)
	mustRefuse(t, g, "cannot read its storage's identity", "context deadline exceeded")
	if err := g.Confirm(ctx); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("Confirm while unverified: %v, want 503", err)
	}
	r.store.err = nil
	g.Check(ctx)
	mustServe(t, g)
	for _, e := range r.events() {
		if strings.Contains(e, "Warning") {
			t.Errorf("an outage is no mismatch, yet it was reported as one: %q", e)
		}
	}
}

// TestADeletedRecordIsAMismatch: a record deleted beside a store that
// holds a marker is made again as lost, and the store is refused until an
// operator accepts it; before, the record was rebuilt from the store, so
// deleting one ConfigMap let an older snapshot pass for current.
func TestADeletedRecordIsAMismatch(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	r.guard().Check(ctx)
	old := r.store.snapshot()
	r.store.otherWrite()
	r.guard().Check(ctx) // advances the sequence past the snapshot's
	r.events()

	// Roll back to the snapshot, and delete the record that would say so.
	r.store.restore(old, 1_000_000_000)
	if err := r.client.CoreV1().ConfigMaps("mydb-system").Delete(ctx, "mydb-store", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g := r.guard()
	g.Check(ctx)
	token := Token(r.store.marker)
	mustRefuse(t, g, "was deleted", "cannot tell whether its storage ("+token+")", "accept-store="+token)
	if rec := r.recorded(t); rec == nil || rec.UID != LostRecord {
		t.Fatalf("the record %+v must be made again as %q", rec, LostRecord)
	}
	if evs := r.events(); len(evs) != 1 || !strings.Contains(evs[0], "Warning "+ReasonStoreMismatch) {
		t.Errorf("events %q, want one StoreMismatch", evs)
	}
	// Checked again (and by another replica), it stays refused.
	g.Check(ctx)
	r.guard().Check(ctx)
	mustRefuse(t, g, "was deleted")

	// The operator accepts the store as it is: served again, beyond both
	// sequences.
	r.annotate(t, token)
	g.Check(ctx)
	mustServe(t, g)
	if rec := r.recorded(t); rec == nil || rec.UID != old.marker.UID || rec.Sequence <= old.marker.Sequence || rec.Accept != "" {
		t.Fatalf("after the acceptance the record is %+v, want store %s past sequence %d", rec, old.marker.UID, old.marker.Sequence)
	}
}

func TestAStrayAcceptanceDoesNotRefuseAGoodStore(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	r.annotate(t, "some-uid@3")
	g.Check(ctx)
	mustServe(t, g)
}

// write is otherWrite, returning the revision it wrote at.
func (s *memStore) write() int64 {
	s.otherWrite()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revision
}

func TestACoveredWriteIsNeverInASnapshotThatPasses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRig()
	g := New(r.store, r.record, time.Hour) // only Cover makes it check
	g.Check(ctx)
	go g.Run(ctx)

	// Without Cover, a write made after the last check is in the blind
	// spot: a snapshot without it passes for current.
	before := r.store.snapshot()
	r.store.write()
	r.store.restore(before, 0)
	g.Check(ctx)
	mustServe(t, g)

	// With Cover, a snapshot taken before the write is a rollback.
	before = r.store.snapshot()
	revision := r.store.write()
	coverCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := g.Cover(coverCtx, revision); err != nil {
		t.Fatalf("Cover: %v", err)
	}
	if seq := r.recorded(t).Sequence; seq <= before.marker.Sequence {
		t.Fatalf("Cover returned with the record at sequence %d, the snapshot's %d", seq, before.marker.Sequence)
	}
	r.store.restore(before, 1000) // as etcdutl --bump-revision
	g.Check(ctx)
	mustRefuse(t, g, "rolled back")
}

func TestCoverOfWhatTheRecordCoversChecksNothing(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard() // Run is not running: a Cover that needed a check would wait
	revision := r.store.write()
	g.Check(ctx) // advances past the write
	seq := r.recorded(t).Sequence
	timeout, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := g.Cover(timeout, revision); err != nil {
		t.Fatalf("the last check covered revision %d, yet Cover: %v", revision, err)
	}
	// Nothing written since the marker: the marker itself covers all.
	g.Check(ctx)
	state, _ := r.store.Read(ctx)
	if err := g.Cover(timeout, state.Revision); err != nil {
		t.Fatalf("Cover of the store's revision with nothing written since the marker: %v", err)
	}
	if got := r.recorded(t).Sequence; got != seq {
		t.Fatalf("the record moved from %d to %d without a write to cover", seq, got)
	}
	// An uncovered write waits for a check that never comes.
	if err := g.Cover(timeout, r.store.write()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cover without a check: %v, want the context's deadline", err)
	}
}

func TestCoversOfABurstShareChecks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRig()
	g := New(r.store, r.record, time.Hour)
	g.Check(ctx)
	start := r.recorded(t).Sequence

	// A burst of writes, each covered by its own caller; the guard's loop
	// starts once they wait.
	const writers = 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		revision := r.store.write()
		wg.Add(1)
		go func() {
			defer wg.Done()
			timeout, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			errs <- g.Cover(timeout, revision)
		}()
	}
	go g.Run(ctx)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Cover: %v", err)
		}
	}
	if advanced := r.recorded(t).Sequence - start; advanced != 1 {
		t.Fatalf("%d covers of one burst advanced the record %d times, want once", writers, advanced)
	}
}

func TestCoverRefusesWhileTheStoreIsNotVerified(t *testing.T) {
	ctx := context.Background()
	r := newRig()
	g := r.guard()
	g.Check(ctx)
	revision := r.store.write()
	r.store.wipe()
	g.Check(ctx)
	if err := g.Cover(ctx, revision); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("Cover on a refused store: %v, want 503", err)
	}
	// A store accepted after a wipe starts its revisions anew: what the
	// old one covered says nothing.
	r.annotate(t, "empty")
	g.Check(ctx)
	mustServe(t, g)
	timeout, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := g.Cover(timeout, revision); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cover of a revision the accepted store has not covered: %v, want a wait", err)
	}
}
