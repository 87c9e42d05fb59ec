//go:build e2e && faults

package e2e

// The fault suite needs a control plane whose mydb etcd has three members
// (hack/local-up.sh with MYDB_ETCD_MEMBERS=3), so it builds only with the
// faults tag, which `make test-faults` sets after starting one.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/test/stats"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const seqAnnotation = "e2e.mydb.example.com/seq"

// TestEtcdMemberKillsLoseNoAcknowledgedWrite kills -9 a random member of
// mydb's three-member etcd (fsync on) every few seconds and starts it
// again, while writers create MyDatabases and patch them through the
// aggregator and record every write that was acknowledged. Afterwards every
// acknowledged object must read back with its last acknowledged content at
// its acknowledged resourceVersion or later, and mydb-apiserver must have
// kept its pid with /livez ok throughout.
//
// MYDB_E2E_LONG=1 runs 20 kill cycles instead of 5.
func TestEtcdMemberKillsLoseNoAcknowledgedWrite(t *testing.T) {
	cycles := 5
	if os.Getenv("MYDB_E2E_LONG") == "1" {
		cycles = 20
	}
	const writers, perWriter = 3, 8
	localDir := e2eLocalDir
	members := []*localProcess{
		localComponent(t, localDir, "mydb-etcd"),
		localComponent(t, localDir, "mydb-etcd-1"),
		localComponent(t, localDir, "mydb-etcd-2"),
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.ensureRunning(t)
		}
	})
	health := etcdHealthClient(t, localDir)
	server := localComponent(t, localDir, "mydb-apiserver")
	serverPID := server.pid
	direct := directConfig(t, mustAtoi(t, flagValue(t, server.args, "--secure-port")))
	cfg := restConfig(t)
	cfg.Timeout = 15 * time.Second
	mydb := mydbClient(t, cfg)
	ns := newNamespace(t)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	livez := watchLivez(ctx, t, direct)

	var kills killWindows
	rec := &writeRecord{acked: map[string]ackedWrite{}, attempted: map[string]int{}}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			runWriter(ctx, mydb.ExampleV1().MyDatabases(ns), w, perWriter, rec, &kills)
		}(w)
	}

	// Let the writers get going, then the kills.
	time.Sleep(2 * time.Second)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var recoveries []time.Duration
	for c := 0; c < cycles; c++ {
		m := members[rng.Intn(len(members))]
		start := time.Now()
		kills.begin(start)
		if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
			t.Fatalf("cycle %d: kill -9 %s (pid %d): %v", c, m.name, m.pid, err)
		}
		for m.alive() {
			time.Sleep(20 * time.Millisecond)
		}
		m.pid = 0
		time.Sleep(time.Second) // down for a moment, as a crashed node would be
		m.start(t)
		port := mustAtoi(t, strings.TrimPrefix(flagValue(t, m.args, "--listen-client-urls"), "https://127.0.0.1:"))
		eventually(t, time.Minute, func() error { return memberHealthy(health, port) })
		kills.end(time.Now())
		recoveries = append(recoveries, time.Since(start))
		t.Logf("cycle %d: killed %s, healthy again after %s", c+1, m.name, time.Since(start).Round(10*time.Millisecond))
		time.Sleep(2 * time.Second)
	}
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	// Every acknowledged write must be there.
	lost := 0
	for name, want := range rec.acked {
		got, err := mydb.ExampleV1().MyDatabases(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			lost++
			t.Errorf("%s: acknowledged at resourceVersion %s (seq %d), now: %v", name, want.resourceVersion, want.seq, err)
			continue
		}
		if got.UID != want.uid {
			lost++
			t.Errorf("%s: acknowledged with uid %s, now uid %s", name, want.uid, got.UID)
			continue
		}
		seq, _ := strconv.Atoi(got.Annotations[seqAnnotation])
		if seq < want.seq || seq > rec.attempted[name] {
			lost++
			t.Errorf("%s: last acknowledged seq %d (at most %d attempted), reads back seq %d", name, want.seq, rec.attempted[name], seq)
		}
		if rvNumber(t, got.ResourceVersion) < rvNumber(t, want.resourceVersion) {
			lost++
			t.Errorf("%s: acknowledged at resourceVersion %s, reads back %s", name, want.resourceVersion, got.ResourceVersion)
		}
	}

	livezFailures, livezChecks := livez()
	if !server.alive() || server.pid != serverPID {
		t.Errorf("mydb-apiserver restarted: pid %d before, alive=%v", serverPID, server.alive())
	}
	if livezFailures > 0 {
		t.Errorf("mydb-apiserver /livez failed %d of %d checks", livezFailures, livezChecks)
	}

	rec.report(t, cycles, lost, recoveries, livezChecks)
	if rec.internal > 0 {
		t.Errorf("%d writes answered 500 (%v); an etcd member lost mid-request must answer 504 with Retry-After", rec.internal, rec.errorKinds)
	}
}

// ackedWrite is the last acknowledged write of one object.
type ackedWrite struct {
	uid             types.UID
	seq             int
	resourceVersion string
}

// writeRecord holds what the writers were told, and how each write went.
type writeRecord struct {
	mu                        sync.Mutex
	acked                     map[string]ackedWrite
	attempted                 map[string]int // highest seq sent, acknowledged or not
	creates, updates          int
	errorsInKill, errorsOther int
	errorKinds                map[string]int
	// internal counts 500s: a lost member must be answered as a timeout
	// or unavailability the client may retry, never as a server bug.
	internal        int
	inKill, outside []time.Duration
}

func (r *writeRecord) attempt(name string, seq int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq > r.attempted[name] {
		r.attempted[name] = seq
	}
}

func (r *writeRecord) done(db *examplev1.MyDatabase, create bool, took time.Duration, during bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if during {
		r.inKill = append(r.inKill, took)
	} else {
		r.outside = append(r.outside, took)
	}
	if err != nil {
		if during {
			r.errorsInKill++
		} else {
			r.errorsOther++
		}
		if r.errorKinds == nil {
			r.errorKinds = map[string]int{}
		}
		msg := err.Error()
		if len(msg) > 80 {
			msg = msg[:80]
		}
		code := 0
		if status, ok := err.(apierrors.APIStatus); ok {
			code = int(status.Status().Code)
		}
		if code == http.StatusInternalServerError {
			r.internal++
		}
		r.errorKinds[fmt.Sprintf("%d %s", code, msg)]++
		return
	}
	if create {
		r.creates++
	} else {
		r.updates++
	}
	seq, _ := strconv.Atoi(db.Annotations[seqAnnotation])
	r.acked[db.Name] = ackedWrite{uid: db.UID, seq: seq, resourceVersion: db.ResourceVersion}
}

func (r *writeRecord) report(t *testing.T, cycles, lost int, recoveries []time.Duration, livezChecks int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("FIGURES: %d kill -9 cycles; %d acknowledged creates, %d acknowledged updates of %d objects; %d acknowledged writes lost",
		cycles, r.creates, r.updates, len(r.acked), lost)
	t.Logf("FIGURES: write errors %d during kills (of %d writes), %d outside (of %d); kinds: %v",
		r.errorsInKill, len(r.inKill), r.errorsOther, len(r.outside), r.errorKinds)
	t.Logf("FIGURES: write latency during kills p50 %s p99 %s max %s; outside p50 %s p99 %s max %s",
		stats.Percentile(r.inKill, 50), stats.Percentile(r.inKill, 99), stats.Percentile(r.inKill, 100),
		stats.Percentile(r.outside, 50), stats.Percentile(r.outside, 99), stats.Percentile(r.outside, 100))
	t.Logf("FIGURES: member kill to healthy: p50 %s max %s; mydb-apiserver pid unchanged, /livez ok in %d checks",
		stats.Percentile(recoveries, 50), stats.Percentile(recoveries, 100), livezChecks)
}

// runWriter creates perWriter databases, one every few writes, and patches
// the seq annotation of a random one of them otherwise, until ctx ends.
func runWriter(ctx context.Context, dbs interface {
	Create(context.Context, *examplev1.MyDatabase, metav1.CreateOptions) (*examplev1.MyDatabase, error)
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*examplev1.MyDatabase, error)
}, w, perWriter int, rec *writeRecord, kills *killWindows) {
	rng := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
	var mine []string
	seq := map[string]int{}
	for i := 0; ctx.Err() == nil; i++ {
		var (
			got    *examplev1.MyDatabase
			err    error
			create = len(mine) < perWriter && (len(mine) == 0 || i%5 == 0)
		)
		start := time.Now()
		if create {
			name := fmt.Sprintf("faults-%d-%02d", w, len(mine))
			db := &examplev1.MyDatabase{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{seqAnnotation: "1"}},
				Spec:       examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi"), Replicas: ptr.To[int32](1)},
			}
			rec.attempt(name, 1)
			got, err = dbs.Create(context.Background(), db, metav1.CreateOptions{})
			if err == nil || strings.Contains(err.Error(), "already exists") {
				// An ambiguous create that landed is patched from here on.
				mine, seq[name] = append(mine, name), 1
			}
		} else {
			name := mine[rng.Intn(len(mine))]
			seq[name]++
			rec.attempt(name, seq[name])
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, seqAnnotation, strconv.Itoa(seq[name]))
			got, err = dbs.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
		took := time.Since(start)
		rec.done(got, create, took, kills.overlaps(start, start.Add(took)), err)
		time.Sleep(50 * time.Millisecond)
	}
}

// killWindows are the spans from a member's kill to its health.
type killWindows struct {
	mu    sync.Mutex
	spans [][2]time.Time // an open span has a zero end
}

func (k *killWindows) begin(at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spans = append(k.spans, [2]time.Time{at})
}

func (k *killWindows) end(at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spans[len(k.spans)-1][1] = at
}

func (k *killWindows) overlaps(from, to time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.spans {
		end := s[1]
		if end.IsZero() {
			end = to // still open
		}
		if !to.Before(s[0]) && !from.After(end) {
			return true
		}
	}
	return false
}

// watchLivez checks mydb-apiserver's /livez every 200ms until ctx ends;
// the function it returns reports failures and checks.
func watchLivez(ctx context.Context, t *testing.T, direct *rest.Config) func() (int, int) {
	t.Helper()
	client, err := rest.HTTPClientFor(direct)
	if err != nil {
		t.Fatal(err)
	}
	client.Timeout = 5 * time.Second
	var mu sync.Mutex
	failures, checks := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			ok := false
			if resp, err := client.Get(direct.Host + "/livez"); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			mu.Lock()
			checks++
			if !ok {
				failures++
			}
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() (int, int) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return failures, checks
	}
}

// etcdHealthClient speaks TLS to mydb's etcd members with the client
// certificate local-up made for mydb-apiserver.
func etcdHealthClient(t *testing.T, localDir string) *http.Client {
	t.Helper()
	pki := filepath.Join(localDir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "mydb-etcd-client.crt"), filepath.Join(pki, "mydb-etcd-client.key"))
	if err != nil {
		t.Fatalf("mydb's etcd client certificate (local-up with MYDB_ETCD_MEMBERS=3): %v", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "mydb-etcd-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}
}

func memberHealthy(client *http.Client, port int) error {
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/health", port))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd :%d /health: %d", port, resp.StatusCode)
	}
	return nil
}

func rvNumber(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}
