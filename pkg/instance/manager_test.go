package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// fakeDriver is a driver whose engine is a shell loop that exits 0 on
// SIGTERM, so the Manager's supervision runs for real.
type fakeDriver struct {
	mu         sync.Mutex
	hasData    bool
	sysID      string
	writable   bool
	upstream   string
	bootstraps int
	clones     int
	// readyFile is where the running server says it is ready.
	readyFile string
	promotes  int
	// lost makes Follow report that the data cannot catch up, once.
	lost bool
	// stopsToFence makes the fake fence like Postgres (by a clean stop);
	// fences counts Fence calls.
	stopsToFence bool
	fences       int
	// synchronous is what SetSynchronous last set; syncSets counts changes.
	synchronous bool
	syncSets    int
	// syncAtPromote is what synchronous was when Promote last ran.
	syncAtPromote bool
}

func (f *fakeDriver) SetSynchronous(_ context.Context, on bool) error {
	f.locked(func() {
		if f.synchronous != on {
			f.synchronous, f.syncSets = on, f.syncSets+1
		}
	})
	return nil
}

func (f *fakeDriver) locked(fn func()) { f.mu.Lock(); defer f.mu.Unlock(); fn() }

func (f *fakeDriver) HasData() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hasData, nil
}

func (f *fakeDriver) SystemID() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.hasData {
		return "", errors.New("no data")
	}
	return f.sysID, nil
}

func (f *fakeDriver) Bootstrap(context.Context) error {
	f.locked(func() { f.bootstraps++; f.hasData, f.sysID, f.writable = true, "sys-new", false })
	return nil
}

func (f *fakeDriver) Clone(_ context.Context, t Topology) error {
	f.locked(func() { f.clones++; f.hasData, f.sysID, f.writable, f.upstream = true, "sys-"+t.Primary, false, "" })
	return nil
}

func (f *fakeDriver) Command() (*exec.Cmd, error) {
	// The shell says it is ready once its trap is set: a SIGTERM before
	// that would kill it, which the manager rightly reports as unclean.
	ready := filepath.Join(os.TempDir(), fmt.Sprintf("fake-engine-%d-%p-%d", os.Getpid(), f, time.Now().UnixNano()))
	f.locked(func() { f.readyFile = ready })
	return exec.Command("sh", "-c", `trap 'exit 0' TERM; : > "$0"; while :; do sleep 0.05; done`, ready), nil
}

func (f *fakeDriver) StopSignal() syscall.Signal { return syscall.SIGTERM }
func (f *fakeDriver) WaitReady(ctx context.Context) error {
	var ready string
	f.locked(func() { ready = f.readyFile })
	return PollUntil(ctx, 5*time.Millisecond, func() error { _, err := os.Stat(ready); return err })
}

func (f *fakeDriver) Close() {
	f.locked(func() { _ = os.Remove(f.readyFile) })
}

func (f *fakeDriver) Follow(_ context.Context, t Topology) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lost {
		f.lost = false
		return fmt.Errorf("%w: binlog purged", ErrMustReclone)
	}
	f.upstream = net.JoinHostPort(t.PrimaryHost, fmt.Sprint(t.PrimaryPort))
	return nil
}

func (f *fakeDriver) Promote(context.Context) error {
	f.locked(func() { f.promotes++; f.writable, f.upstream, f.syncAtPromote = true, "", f.synchronous })
	return nil
}

func (f *fakeDriver) Probe(context.Context) (Probe, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lag := 0.0
	return Probe{Writable: f.writable, SystemIdentifier: f.sysID, Streaming: f.upstream != "", Upstream: f.upstream, LagSeconds: &lag,
		Synchronous: f.writable && f.synchronous}, nil
}

func (f *fakeDriver) FenceStops() bool { return f.stopsToFence }

func (f *fakeDriver) Fence(context.Context) (api.Position, error) {
	f.locked(func() { f.fences++; f.writable = false })
	return api.Position{LSN: "0/3000029", Timeline: 1}, nil
}

// ServeClone makes the fake a CloneServer.
func (f *fakeDriver) ServeClone(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "backup") }

// chanSource is a TopologySource the test feeds.
type chanSource chan Topology

func (c chanSource) Watch(context.Context) <-chan Topology { return c }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type harness struct {
	t    *testing.T
	m    *Manager
	fake *fakeDriver
	src  chanSource
	addr string
	stop context.CancelFunc
	done chan struct{} // closed when Run returned
	err  error         // what Run returned
}

func startManager(t *testing.T, fake *fakeDriver, name string) *harness {
	t.Helper()
	return startManagerFor(t, fake, fake, name)
}

// startManagerFor runs a Manager of driver, which wraps fake.
func startManagerFor(t *testing.T, driver Driver, fake *fakeDriver, name string) *harness {
	t.Helper()
	return startManagerWith(t, driver, fake, name, nil)
}

// startManagerWith is startManagerFor with options changed by mod.
func startManagerWith(t *testing.T, driver Driver, fake *fakeDriver, name string, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, fake: fake, src: make(chanSource, 1), addr: freeAddr(t), done: make(chan struct{})}
	opts := Options{
		Name: name, Engine: "fake", DataRoot: t.TempDir(), StatusAddress: h.addr, StopTimeout: 5 * time.Second,
		MaxReadyLag: 10 * time.Second, Identity: testIdentity(t, name),
	}
	if mod != nil {
		mod(&opts)
	}
	h.m = NewManager(opts, driver, h.src)
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.err = h.m.Run(ctx); close(h.done) }()
	if err := PollUntil(ctx, 10*time.Millisecond, func() error {
		resp, err := httpsClient(nil, name).Get("https://" + h.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("the manager did not stop")
		}
	})
	return h
}

// wait polls the status until cond holds.
func (h *harness) wait(what string, cond func(api.Status) bool) api.Status {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var s api.Status
	for time.Now().Before(deadline) {
		s = h.m.Status(context.Background())
		if cond(s) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("no %s within 10s: %+v", what, s)
	return s
}

// get is GET path of the manager as creds say (nil: without a
// certificate, as the kubelet).
func (h *harness) get(path string, creds *api.Credentials) int {
	resp, err := httpsClient(creds, h.m.opts.Name).Get("https://" + h.addr + path)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSyncIsSetBeforeThePromotion: a Sync database's new primary waits for
// a replica from its first commit on, so the settings precede Promote.
func TestSyncIsSetBeforeThePromotion(t *testing.T) {
	driver := &fakeDriver{}
	h := startManager(t, driver, "db-0")
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432, Synchronous: true}
	h.wait("a synchronous primary", func(s api.Status) bool { return s.Ready && s.Synchronous })
	driver.locked(func() {
		if driver.promotes != 1 || !driver.syncAtPromote {
			t.Errorf("promotes %d, synchronous when promoted %v", driver.promotes, driver.syncAtPromote)
		}
	})
}

func TestManagerPrimaryLifecycle(t *testing.T) {
	driver := &fakeDriver{}
	h := startManager(t, driver, "db-0")

	s := h.wait("waiting", func(s api.Status) bool { return s.Role == api.RoleWaiting })
	if s.Ready || s.EngineRunning {
		t.Fatalf("before a topology: %+v", s)
	}
	if h.get("/healthz", nil) != 200 || h.get("/readyz", nil) != 503 {
		t.Error("a waiting manager must be alive and not ready")
	}

	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	s = h.wait("a ready primary", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })
	if driver.bootstraps != 1 || driver.promotes != 1 || s.SystemIdentifier != "sys-new" {
		t.Errorf("bootstraps %d, promotes %d, status %+v", driver.bootstraps, driver.promotes, s)
	}
	if h.get("/readyz", nil) != 200 {
		t.Error("/readyz of a ready primary")
	}

	// The clone endpoint admits only the database's instances; the status
	// the controller and the instances.
	for _, c := range []struct {
		who   string
		path  string
		creds *api.Credentials
		want  int
	}{
		{"no certificate", "/v1/clone", nil, 401},
		{"the controller", "/v1/clone", testDatabase.Controller(), 403},
		{"an instance", "/v1/clone", testDatabase.Instance("db-1"), 200},
		{"no certificate", api.PathStatus, nil, 401},
		{"the controller", api.PathStatus, testDatabase.Controller(), 200},
		{"an instance", api.PathStatus, testDatabase.Instance("db-1"), 200},
	} {
		if got := h.get(c.path, c.creds); got != c.want {
			t.Errorf("%s as %s: %d, want %d", c.path, c.who, got, c.want)
		}
	}
	// Another database's certificate does not get through the handshake.
	if _, err := httpsClient(testDatabase.Stranger(), "db-0").Get("https://" + h.addr + api.PathStatus); err == nil {
		t.Error("a certificate of another CA was let through the handshake")
	}

	// The topology's Synchronous reaches the engine, and /v1/status.
	if s.Synchronous {
		t.Errorf("synchronous before the topology asked: %+v", s)
	}
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432, Synchronous: true}
	s = h.wait("a synchronous primary", func(s api.Status) bool { return s.Ready && s.Synchronous })
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	s = h.wait("an asynchronous primary", func(s api.Status) bool { return s.Ready && !s.Synchronous })
	driver.locked(func() {
		if driver.syncSets != 2 {
			t.Errorf("SetSynchronous changed the setting %d times, want 2", driver.syncSets)
		}
	})

	// A crash is noticed, counted and repaired after the backoff.
	pid := s.EnginePID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	down := h.wait("the crash noticed", func(s api.Status) bool { return s.Restarts == 1 })
	if down.Ready || !strings.Contains(down.LastExit, "killed by signal 9") || down.LastExitTime == nil {
		t.Errorf("after the crash: %+v", down)
	}
	up := h.wait("the engine restarted", func(s api.Status) bool { return s.Ready && s.EngineRunning && s.EnginePID != pid })
	if driver.bootstraps != 1 {
		t.Errorf("bootstrapped %d times", driver.bootstraps)
	}
	if up.Restarts != 1 {
		t.Errorf("restarts %d", up.Restarts)
	}

	// Told to be a replica, a former primary re-clones rather than follow.
	h.src <- Topology{Primary: "db-1", PrimaryHost: "127.0.0.2", PrimaryPort: 5432}
	s = h.wait("a ready replica", func(s api.Status) bool { return s.Ready && s.Role == api.RoleReplica })
	if driver.clones != 1 || s.Upstream != "127.0.0.2:5432" || s.SystemIdentifier != "sys-db-1" {
		t.Errorf("clones %d, status %+v", driver.clones, s)
	}
	if h.get("/v1/clone", testDatabase.Instance("db-2")) != 503 {
		t.Error("a replica served a clone")
	}

	h.stop()
	select {
	case <-h.done:
		if h.err != nil {
			t.Errorf("Run after a clean stop: %v", h.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the manager did not stop")
	}
}

func TestManagerKeepsOrReplacesReplicaData(t *testing.T) {
	for _, c := range []struct {
		name        string
		primarySys  string
		wantClones  int
		description string
	}{
		{"same system", "sys-mine", 0, "data of the primary's system is kept"},
		{"other system", "sys-other", 1, "data of another system is replaced by a clone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			primary := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_ = json.NewEncoder(w).Encode(api.Status{Name: "db-0", Role: api.RolePrimary, SystemIdentifier: c.primarySys})
			}))
			primary.TLS = testIdentity(t, "db-0").ServerConfig()
			primary.StartTLS()
			defer primary.Close()
			driver := &fakeDriver{hasData: true, sysID: "sys-mine"}
			h := startManager(t, driver, "db-1")
			h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432, PrimaryStatusURL: primary.URL}
			h.wait("a ready replica", func(s api.Status) bool { return s.Ready && s.Role == api.RoleReplica })
			if driver.clones != c.wantClones || driver.bootstraps != 0 {
				t.Errorf("%s: clones %d, bootstraps %d", c.description, driver.clones, driver.bootstraps)
			}
		})
	}
}

func TestManagerReclonesAReplicaThatCannotCatchUp(t *testing.T) {
	driver := &fakeDriver{hasData: true, sysID: "sys-db-0", lost: true}
	h := startManager(t, driver, "db-1")
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a ready replica", func(s api.Status) bool { return s.Ready && s.Role == api.RoleReplica })
	if driver.clones != 1 {
		t.Errorf("clones %d, want 1", driver.clones)
	}
}

func TestReadiness(t *testing.T) {
	m := &Manager{opts: Options{MaxReadyLag: 10 * time.Second, MaxReadyLagBytes: 1 << 20}}
	primary := managerState{role: api.RolePrimary}
	replica := managerState{role: api.RoleReplica, topology: Topology{PrimaryHost: "10.0.0.1", PrimaryPort: 5432}}
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name string
		st   managerState
		p    Probe
		want bool
	}{
		{"writable primary", primary, Probe{Writable: true}, true},
		{"primary still read-only", primary, Probe{}, false},
		{"streaming replica", replica, Probe{Streaming: true, Upstream: "10.0.0.1:5432", LagSeconds: f(0.1), LagBytes: i(100)}, true},
		{"replica of another primary", replica, Probe{Streaming: true, Upstream: "10.0.0.9:5432"}, false},
		{"replica not streaming", replica, Probe{Upstream: "10.0.0.1:5432"}, false},
		{"replica lagging in time", replica, Probe{Streaming: true, Upstream: "10.0.0.1:5432", LagSeconds: f(11)}, false},
		{"replica lagging in bytes", replica, Probe{Streaming: true, Upstream: "10.0.0.1:5432", LagBytes: i(2 << 20)}, false},
		{"writable replica", replica, Probe{Writable: true, Streaming: true, Upstream: "10.0.0.1:5432"}, false},
	} {
		if got, reason := m.readiness(c.st, c.p); got != c.want {
			t.Errorf("%s: ready %v (%s), want %v", c.name, got, reason, c.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := backoff(n + 1); got != w {
			t.Errorf("backoff(%d) = %s, want %s", n+1, got, w)
		}
	}
}

// selfRestarting is a driver whose engine exits asking for a restart the
// first time it runs, as mysqld does (status 16) after RESTART or a clone
// into its own data directory.
type selfRestarting struct {
	*fakeDriver
	starts int
}

func (d *selfRestarting) Command() (*exec.Cmd, error) {
	var n int
	d.locked(func() { d.starts++; n = d.starts })
	if n == 1 {
		return exec.Command("sh", "-c", "sleep 0.2; exit 16"), nil
	}
	return d.fakeDriver.Command()
}

func (d *selfRestarting) RestartRequested(code int) bool { return code == 16 }

func TestManagerRestartsAnEngineThatAsks(t *testing.T) {
	driver := &selfRestarting{fakeDriver: &fakeDriver{}}
	h := startManagerFor(t, driver, driver.fakeDriver, "db-0")
	start := time.Now()
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 3306}
	s := h.wait("the engine started again", func(s api.Status) bool {
		var starts int
		driver.locked(func() { starts = driver.starts })
		return starts == 2 && s.EngineRunning && s.Ready
	})
	if s.Restarts != 0 || s.LastExit != "" {
		t.Errorf("a requested restart counted as a crash: %+v", s)
	}
	// No crash backoff (1s) before the new start.
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("restarted after %s", d)
	}
	// Any other exit is still a crash.
	h.m.child().signal(syscall.SIGKILL)
	s = h.wait("a crash", func(s api.Status) bool { return s.Restarts == 1 })
	if !strings.Contains(s.LastExit, "killed") {
		t.Errorf("last exit %q", s.LastExit)
	}
}

// upgrading is a driver whose data needs an upgrade once the server runs;
// the first failUpgrades attempts fail.
type upgrading struct {
	*fakeDriver
	failUpgrades int
	upgrades     int
	// promotedBeforeUpgrade tells whether the server took its role first.
	promotedBeforeUpgrade bool
}

func (d *upgrading) UpgradeData(context.Context) error {
	var n int
	d.locked(func() {
		d.upgrades++
		n = d.upgrades
		if d.promotes > 0 {
			d.promotedBeforeUpgrade = true
		}
	})
	if n <= d.failUpgrades {
		return errors.New("mariadb-upgrade: exit status 1")
	}
	return nil
}

// TestManagerUpgradesTheDataBeforeTheServerTakesItsRole: a failed upgrade
// stops the server (an exit, with its backoff) and the next start tries
// again; the server is promoted only on upgraded data.
func TestManagerUpgradesTheDataBeforeTheServerTakesItsRole(t *testing.T) {
	driver := &upgrading{fakeDriver: &fakeDriver{}, failUpgrades: 1}
	h := startManagerFor(t, driver, driver.fakeDriver, "db-0")
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 3306}
	s := h.wait("a primary on upgraded data", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })
	driver.locked(func() {
		if driver.upgrades != 2 || driver.promotedBeforeUpgrade || driver.promotes != 1 {
			t.Errorf("upgrades %d (want 2: one failed, one done), promoted before the upgrade %v, promotes %d",
				driver.upgrades, driver.promotedBeforeUpgrade, driver.promotes)
		}
	})
	if s.Restarts != 1 || !strings.Contains(s.LastExit, "stopped: upgrading the data to the server's version: mariadb-upgrade: exit status 1") {
		t.Errorf("restarts %d, last exit %q: the server stopped after the failed upgrade must count once, and say why", s.Restarts, s.LastExit)
	}
}

// olderMajor is a driver whose data is of an older major version until
// UpgradeMajor succeeds (failMajor times it fails first) or a clone
// replaces it.
type olderMajor struct {
	*fakeDriver
	old, failMajor, majorUpgrades int
	startedOnOld                  bool
}

func (d *olderMajor) OlderMajor() (string, error) {
	var old int
	d.locked(func() { old = d.old })
	if old == 0 {
		return "", nil
	}
	return fmt.Sprint(old), nil
}

func (d *olderMajor) UpgradeMajor(context.Context) error {
	var n int
	d.locked(func() { d.majorUpgrades++; n = d.majorUpgrades })
	if n <= d.failMajor {
		return errors.New("the image has no PostgreSQL 15 server")
	}
	d.locked(func() { d.old = 0 })
	return nil
}

func (d *olderMajor) Clone(ctx context.Context, t Topology) error {
	d.locked(func() { d.old = 0 })
	return d.fakeDriver.Clone(ctx, t)
}

func (d *olderMajor) Command() (*exec.Cmd, error) {
	d.locked(func() {
		if d.old != 0 {
			d.startedOnOld = true
		}
	})
	return d.fakeDriver.Command()
}

// TestManagerUpgradesAPrimarysOlderMajorAndReclonesAReplicas: a primary's
// data of an older major is upgraded before its server starts, a failed
// upgrade is tried again after its backoff (and says why meanwhile); a
// replica's is replaced with a clone. No server starts on the old data.
func TestManagerUpgradesAPrimarysOlderMajorAndReclonesAReplicas(t *testing.T) {
	primary := &olderMajor{fakeDriver: &fakeDriver{hasData: true, sysID: "sys-old"}, old: 15, failMajor: 1}
	h := startManagerFor(t, primary, primary.fakeDriver, "db-0")
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	s := h.wait("the failed upgrade's reason", func(s api.Status) bool { return strings.Contains(s.Reason, "the image has no PostgreSQL 15 server") })
	if s.EngineRunning || s.Ready {
		t.Errorf("after a failed upgrade: %+v", s)
	}
	// The backoff (30 s) holds the next try; a new manager tries at once.
	time.Sleep(1500 * time.Millisecond)
	primary.locked(func() {
		if primary.majorUpgrades != 1 {
			t.Errorf("%d upgrades within the backoff, want 1", primary.majorUpgrades)
		}
	})
	h.stop()
	<-h.done
	h = startManagerFor(t, primary, primary.fakeDriver, "db-0")
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a primary on upgraded data", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })

	replica := &olderMajor{fakeDriver: &fakeDriver{hasData: true, sysID: "sys-old"}, old: 15}
	h = startManagerFor(t, replica, replica.fakeDriver, "db-1")
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a replica of the upgraded primary", func(s api.Status) bool { return s.Ready && s.Role == api.RoleReplica })
	for _, d := range []*olderMajor{primary, replica} {
		d.locked(func() {
			if d.startedOnOld {
				t.Error("a server started on data of the older major")
			}
		})
	}
	replica.locked(func() {
		if replica.clones != 1 || replica.majorUpgrades != 0 {
			t.Errorf("replica: %d clones, %d upgrades; want a clone and no upgrade", replica.clones, replica.majorUpgrades)
		}
	})
}

func TestManagerFencesForASwitchover(t *testing.T) {
	for _, stops := range []bool{false, true} {
		t.Run(fmt.Sprintf("fence stops the engine: %v", stops), func(t *testing.T) {
			driver := &fakeDriver{stopsToFence: stops}
			h := startManager(t, driver, "db-0")
			primary := Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
			h.src <- primary
			h.wait("a ready primary", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })

			switching := primary
			switching.TargetPrimary = "db-1"
			h.src <- switching
			s := h.wait("fenced", func(s api.Status) bool { return s.Fenced && s.FencedPosition != nil })
			if s.Ready || s.EngineRunning == stops || s.FencedPosition.LSN != "0/3000029" || !strings.Contains(s.Reason, "db-1") {
				t.Errorf("fenced status %+v", s)
			}
			// It stays fenced: no restart, no promotion, one Fence.
			time.Sleep(1500 * time.Millisecond)
			s = h.m.Status(context.Background())
			if !s.Fenced || s.Ready || driver.fences != 1 || driver.promotes != 1 || s.EngineRunning == stops {
				t.Errorf("after 1.5s: fences %d, promotes %d, status %+v", driver.fences, driver.promotes, s)
			}

			// Aborted (the target cleared): a primary again.
			h.src <- primary
			s = h.wait("a ready primary again", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })
			if s.Fenced || driver.promotes != 2 {
				t.Errorf("unfenced: promotes %d, status %+v", driver.promotes, s)
			}

			// A fence the source asks for (it cannot confirm the topology).
			lost := primary
			lost.Fence = "cannot read the database"
			h.src <- lost
			h.wait("fenced by the source", func(s api.Status) bool { return s.Fenced && s.FencedReason == lost.Fence })

			// Completed: the old primary is a replica of the new one, and
			// re-clones since it served as primary.
			h.src <- Topology{Primary: "db-1", PrimaryHost: "127.0.0.2", PrimaryPort: 5432, TargetPrimary: "db-1"}
			s = h.wait("a ready replica", func(s api.Status) bool { return s.Ready && s.Role == api.RoleReplica })
			if s.Fenced || driver.clones != 1 {
				t.Errorf("clones %d, status %+v", driver.clones, s)
			}
		})
	}
}

// slowProbes is fakeDriver whose probe takes a while and counts how many
// run at once.
type slowProbes struct {
	*fakeDriver
	mu             sync.Mutex
	inFlight, most int
	probes         int
}

func (s *slowProbes) Probe(ctx context.Context) (Probe, error) {
	s.mu.Lock()
	s.inFlight++
	s.probes++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
	time.Sleep(20 * time.Millisecond)
	return s.fakeDriver.Probe(ctx)
}

// TestAFloodOfStatusReadsSharesOneProbe: 100 clients reading /v1/status and
// /readyz at once put one probe at a time on the engine, and every one of
// them is answered that the primary is ready.
func TestAFloodOfStatusReadsSharesOneProbe(t *testing.T) {
	fake := &fakeDriver{}
	slow := &slowProbes{fakeDriver: fake}
	h := startManagerFor(t, slow, fake, "db-0")
	h.src <- Topology{Primary: "db-0"}
	h.wait("a ready primary", func(s api.Status) bool { return s.Ready })
	slow.mu.Lock()
	slow.most, slow.probes = 0, 0
	slow.mu.Unlock()

	var wg sync.WaitGroup
	codes := make(chan int, 200)
	controller := httpsClient(testDatabase.Controller(), "db-0")
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, path := range []string{api.PathStatus, api.PathReadyz} {
				resp, err := controller.Get("https://" + h.addr + path)
				if err != nil {
					codes <- 0
					continue
				}
				resp.Body.Close()
				codes <- resp.StatusCode
			}
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a status read answered %d, want 200", c)
			break
		}
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	// The manager's own loop probes on its own (the control loop's are
	// not shared): at most one beside the readers' one.
	if slow.most > 2 {
		t.Errorf("%d probes ran at once, want the readers' one (and the loop's)", slow.most)
	}
	// The manager's own loop probes too, one at a time beside them: far
	// fewer probes than the 200 reads.
	if slow.probes >= 100 {
		t.Errorf("%d probes for 200 reads", slow.probes)
	}
	t.Logf("200 status reads from 100 clients: %d probes", slow.probes)
}

// endlessClone serves a clone that never ends, and says when and how its
// last write failed.
type endlessClone struct {
	*fakeDriver
	ended chan error
}

func (e *endlessClone) ServeClone(w http.ResponseWriter, _ *http.Request) {
	chunk := make([]byte, 64<<10)
	for {
		if _, err := w.Write(chunk); err != nil {
			e.ended <- err
			return
		}
	}
}

// TestAStalledCloneReaderIsDropped: a client that stops reading a clone
// stream is dropped once a write has stood still for StreamStall, so the
// engine tool behind the stream (and its backup lock) does not wait on it.
func TestAStalledCloneReaderIsDropped(t *testing.T) {
	fake := &fakeDriver{}
	clone := &endlessClone{fakeDriver: fake, ended: make(chan error, 1)}
	h := startManagerWith(t, clone, fake, "db-0", func(o *Options) { o.StreamStall = 300 * time.Millisecond })
	h.src <- Topology{Primary: "db-0"}
	h.wait("a ready primary", func(s api.Status) bool { return s.Ready })

	resp, err := httpsClient(testDatabase.Instance("db-1"), "db-0").Get("https://" + h.addr + api.PathClone)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	// The client stops reading, but keeps the connection.
	start := time.Now()
	select {
	case err := <-clone.ended:
		t.Logf("the stalled stream ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("the clone stream still waits for a client that stopped reading 10s ago")
	}
}

// TestReadinessProbesShareARecentProbe: /readyz, which anyone who reaches
// the pod may call as the kubelet does, answers from a probe at most
// cachedProbeAge old: 50 reads one after the other put a handful of probes
// on the engine, not 50; /v1/status still probes for each reader that does
// not join one in flight.
func TestReadinessProbesShareARecentProbe(t *testing.T) {
	fake := &fakeDriver{}
	slow := &slowProbes{fakeDriver: fake}
	h := startManagerFor(t, slow, fake, "db-0")
	h.src <- Topology{Primary: "db-0"}
	h.wait("a ready primary", func(s api.Status) bool { return s.Ready })
	count := func() int {
		slow.mu.Lock()
		defer slow.mu.Unlock()
		return slow.probes
	}
	before := count()
	start := time.Now()
	for range 50 {
		if code := h.get(api.PathReadyz, nil); code != http.StatusOK {
			t.Fatalf("/readyz answered %d", code)
		}
	}
	took := time.Since(start)
	readyz := count() - before
	// The manager's own loop probes too, about once a second.
	if limit := 2*int(took/cachedProbeAge) + 3; readyz > limit {
		t.Errorf("50 readiness reads in %s put %d probes on the engine, want at most %d", took.Round(time.Millisecond), readyz, limit)
	}
	before = count()
	for range 5 {
		if code := h.get(api.PathStatus, testDatabase.Controller()); code != http.StatusOK {
			t.Fatalf("/v1/status answered %d", code)
		}
	}
	if status := count() - before; status < 5 {
		t.Errorf("5 status reads one after the other put %d probes on the engine, want one each", status)
	}
	t.Logf("50 readiness reads in %s: %d probes", took.Round(time.Millisecond), readyz)
}
