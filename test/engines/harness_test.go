//go:build engines

package engines

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
	"github.com/mydb-dev/mydb/pkg/pki/pkitest"
	"github.com/mydb-dev/mydb/test/instanceproc"
)

// engineSpec is what the shared flow needs to know about an engine.
type engineSpec struct {
	name   string
	osUser string
	// image, when set, is the engine image (hack/images.sh) whose root
	// filesystem the instances run in (imageroot_test.go), for an engine
	// this machine does not package.
	image      string
	binDir     string
	dataSubdir string
	// ipPrefix gives each instance its own loopback address: 127.0.x.(n+1).
	ipPrefix string
	// openApp opens a database/sql pool as user on the instance, over TCP.
	openApp func(host string, port int, user, password, database string) (*sql.DB, error)
	// assertCleanStop checks the engine's own record of the last shutdown.
	assertCleanStop func(t *testing.T, in *node, logFrom int64)
	// assertAppConfined checks the application user is no superuser.
	assertAppConfined func(t *testing.T, c *cluster, app *sql.DB)
	// bulkLoad fills table bulk (id, v) with about 60 MB, so the clone
	// copies more than an empty catalogue.
	bulkLoad []string
	// purgeHistory makes the primary drop the history a stopped replica
	// would need (MariaDB: PURGE BINARY LOGS); nil where not covered.
	purgeHistory func(t *testing.T, primary *node)
	// progress turns a position into a number that grows with writes.
	progress func(p *api.Position) uint64
	// sync tells whether a replica holds a commit (testSync).
	sync syncChecks
	// holdCommits keeps every commit on n waiting (its SQL thread's too)
	// for d, as root (FLUSH TABLES WITH READ LOCK); nil where not covered.
	holdCommits func(n *node, d time.Duration) error
}

// cluster is one database: instances sharing secrets and a topology file.
type cluster struct {
	t       testing.TB
	spec    engineSpec
	dir     string
	secrets map[string]string
	// ca is the database's CA and issuer; controller the credentials the
	// suite calls the managers with, as mydb's controller would.
	ca         *pkitest.Database
	controller *api.Credentials
	topology   string
	nodes      []*node
	uid, gid   int
	// image is the engine image's root the instances run in, if any.
	image *imageRoot
	leaks *leakWatch
	// synchronous is the topology's Synchronous, parameters its
	// Parameters.
	synchronous bool
	parameters  string
	// replicateByAdminPort: the topology names the primary's admin port
	// (MySQL), as for a database whose clients get a server certificate
	// of the user's own.
	replicateByAdminPort bool
}

// node is one mydb-instance process and its directories.
type node struct {
	c    *cluster
	name string
	host string
	port int
	// adminPort is the admin interface: MySQL's, MariaDB's relay in the
	// manager (0 for PostgreSQL).
	adminPort  int
	statusAddr string
	// metricsAddr is where the manager serves /metrics.
	metricsAddr string
	dataRoot    string
	runDir      string
	logPath     string
	// extraArgs are more mydb-instance flags (--restore).
	extraArgs []string
	// image, when set, is the engine image's root this instance runs in
	// instead of its cluster's (a rolling update to another line); binDir,
	// when set, the engine's binaries instead of its cluster's.
	image  *imageRoot
	binDir string

	mu   sync.Mutex
	proc *instanceproc.Process
}

func randomSecret(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func newCluster(t testing.TB, spec engineSpec, n int) *cluster {
	t.Helper()
	return newClusterIn(t, spec, spec.name, spec.ipPrefix, n)
}

// newClusterIn is a cluster in root/dir with addresses ipPrefix(n+1); dir
// must not be a prefix of another cluster's (killUnder matches it).
func newClusterIn(t testing.TB, spec engineSpec, dir, ipPrefix string, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, spec: spec, dir: filepath.Join(root, dir)}
	if spec.image != "" {
		r, err := rootOf(spec.image, spec.osUser)
		if err != nil {
			t.Fatal(err)
		}
		c.image, c.uid, c.gid = r, r.uid, r.gid
	} else {
		u, err := user.Lookup(spec.osUser)
		if err != nil {
			t.Fatalf("user %s: %v (run hack/install-deps.sh)", spec.osUser, err)
		}
		c.uid, _ = strconv.Atoi(u.Uid)
		c.gid, _ = strconv.Atoi(u.Gid)
	}
	c.secrets = map[string]string{
		instance.SecretUsername:            "app",
		instance.SecretDatabase:            "appdb",
		instance.SecretPassword:            randomSecret("app-pw-"),
		instance.SecretSuperuserPassword:   randomSecret("super-pw-"),
		instance.SecretReplicationPassword: randomSecret("repl-pw-"),
	}
	c.mkdir(c.dir, 0o755)
	secretsDir := filepath.Join(c.dir, "secrets")
	c.mkdir(secretsDir, 0o700)
	for k, v := range c.secrets {
		// A trailing newline, as `kubectl create secret --from-file` of an
		// edited file would have: the manager must not take it as part of
		// the password.
		c.writeFile(filepath.Join(secretsDir, k), v+"\n", 0o600)
	}
	c.ca = pkitest.New()
	c.controller = c.ca.Controller()
	for k, v := range c.ca.SecretData() {
		c.writeFile(filepath.Join(secretsDir, k), string(v), 0o600)
	}
	c.topology = filepath.Join(c.dir, "topology.json")
	for i := range n {
		name := fmt.Sprintf("db-%d", i)
		host := fmt.Sprintf("%s%d", ipPrefix, i+1)
		nd := &node{
			c: c, name: name, host: host, port: freePort(t, host),
			statusAddr:  net.JoinHostPort(host, strconv.Itoa(freePort(t, host))),
			metricsAddr: net.JoinHostPort(host, strconv.Itoa(freePort(t, host))),
			dataRoot:    filepath.Join(c.dir, name, "data"),
			runDir:      filepath.Join(c.dir, name, "run"),
			logPath:     filepath.Join(c.dir, name+".log"),
		}
		if c.spec.name == "mysql" || c.spec.name == "mariadb" {
			nd.adminPort = freePort(t, host)
		}
		c.mkdir(filepath.Join(c.dir, name), 0o755)
		c.mkdir(nd.dataRoot, 0o700)
		c.mkdir(nd.runDir, 0o700)
		c.nodes = append(c.nodes, nd)
	}
	c.leaks = watchLeaks(c)
	t.Cleanup(c.cleanup)
	return c
}

func (c *cluster) mkdir(dir string, mode os.FileMode) {
	c.t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chown(dir, c.uid, c.gid); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) writeFile(path, content string, mode os.FileMode) {
	c.t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chown(path, c.uid, c.gid); err != nil {
		c.t.Fatal(err)
	}
}

// The ports the instances listen on are handed out from below the
// kernel's ephemeral range (32768-60999 here), above the control plane's
// 21000-21500 and the real node's 22xxx, each once per run. A port the
// kernel picks could be picked again while an instance is between two
// starts, for a client connection's local end or a listener on port 0 (a
// MySQL restart once failed three minutes long with "Address already in
// use" so); these never are.
const (
	firstInstancePort = 24000
	lastInstancePort  = 32000
)

var nextInstancePort atomic.Int32

func init() { nextInstancePort.Store(firstInstancePort) }

// freePort is a port free on host now that no other freePort call of this
// run has handed out.
func freePort(t testing.TB, host string) int {
	t.Helper()
	for {
		port := int(nextInstancePort.Add(1))
		if port > lastInstancePort {
			t.Fatalf("the instances' ports %d-%d are used up", firstInstancePort, lastInstancePort)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue // another program's: the next one
		}
		ln.Close()
		return port
	}
}

// setPrimary writes the topology file naming p, atomically.
func (c *cluster) setPrimary(p *node) { c.setTopology(p, "") }

// setTopology writes the topology file naming p and a target primary.
func (c *cluster) setTopology(p *node, target string) {
	c.t.Helper()
	topo := instance.Topology{
		Primary: p.name, PrimaryHost: p.host, PrimaryPort: p.port, PrimaryStatusURL: "https://" + p.statusAddr,
		TargetPrimary: target, Synchronous: c.synchronous, Parameters: c.parameters,
	}
	if c.replicateByAdminPort {
		topo.PrimaryAdminPort = p.adminPort
	}
	b, _ := json.Marshal(topo)
	tmp := c.topology + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, c.topology); err != nil {
		c.t.Fatal(err)
	}
}

// setSync writes the topology naming p with Synchronous on or off.
func (c *cluster) setSync(p *node, on bool) {
	c.synchronous = on
	c.setTopology(p, "")
}

// cleanup stops every node (killing what does not stop), then anything
// else left under the cluster's directory; on failure it shows the logs.
func (c *cluster) cleanup() {
	for _, n := range c.nodes {
		if n.running() {
			n.signal(syscall.SIGTERM)
			select {
			case <-n.doneChan():
			case <-time.After(30 * time.Second):
				n.killGroup()
			}
		}
	}
	killUnder(c.dir)
	c.leaks.stop()
	if c.t.Failed() {
		for _, n := range c.nodes {
			b, _ := os.ReadFile(n.logPath)
			lines := strings.Split(string(b), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			c.t.Logf("=== last lines of %s ===\n%s", n.logPath, strings.Join(lines, "\n"))
		}
	}
}

// start runs mydb-instance for n as the engine's user. The suite sets the
// credentials itself instead of going through runuser, whose su-style
// session handling turns a SIGTERM into a SIGKILL of the child after 2s.
func (n *node) start() {
	t := n.c.t
	t.Helper()
	args := []string{
		"--engine", n.c.spec.name,
		"--name", n.name,
		"--data-root", n.dataRoot,
		"--run-dir", n.runDir,
		"--listen-host", n.host,
		"--port", strconv.Itoa(n.port),
		"--admin-port", strconv.Itoa(cmp.Or(n.adminPort, -1)),
		"--status-address", n.statusAddr,
		"--metrics-address", n.metricsAddr,
		"--secrets-dir", filepath.Join(n.c.dir, "secrets"),
		"--topology-file", n.c.topology,
		"--stop-timeout", "25s",
	}
	if binDir := cmp.Or(n.binDir, n.c.spec.binDir); binDir != "" {
		args = append(args, "--bin-dir", binDir)
	}
	o := instanceproc.Options{Binary: binary, Args: append(args, n.extraArgs...), Dir: n.runDir,
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + n.runDir, "LANG=C.UTF-8"},
		UID: n.c.uid, GID: n.c.gid, Log: n.logPath}
	if n.c.image != nil {
		o.Chroot = n.c.image.dir
	}
	if n.image != nil {
		o.Chroot = n.image.dir
	}
	p, err := instanceproc.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
}

func (n *node) process() *instanceproc.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// doneChan is closed once the manager has exited (nil before it started).
func (n *node) doneChan() <-chan struct{} {
	if p := n.process(); p != nil {
		return p.Done()
	}
	return nil
}

func (n *node) running() bool {
	p := n.process()
	return p != nil && p.Running()
}

func (n *node) signal(sig syscall.Signal) {
	if p := n.process(); p != nil {
		p.Signal(sig)
	}
}

func (n *node) killGroup() {
	if p := n.process(); p != nil {
		p.SignalGroup(syscall.SIGKILL)
	}
}

// stop sends SIGTERM to the manager and returns how long it took to exit
// and its exit code.
func (n *node) stop() (time.Duration, int) {
	t := n.c.t
	t.Helper()
	p := n.process()
	took, ok := p.Stop(40 * time.Second)
	if !ok {
		t.Fatalf("%s: the manager did not exit within 40s of SIGTERM", n.name)
	}
	return took, p.ExitCode()
}

// managers calls the instance managers as mydb's controller does.
var managers = &api.Client{Timeout: 3 * time.Second}

// manager is the client of n's manager, and its address.
func (n *node) manager() (*api.Client, string) {
	return managers, n.statusAddr
}

// auth is how the controller reaches n's manager: with the controller's
// certificate of the database's CA, to the manager named n.
func (n *node) auth() api.Auth {
	return api.Auth{Credentials: n.c.controller, Name: n.name}
}

func (n *node) status() (api.Status, error) {
	c, host := n.manager()
	s, err := c.Status(context.Background(), host, n.auth())
	if err != nil {
		return api.Status{}, err
	}
	return *s, nil
}

func (n *node) get(path string) int { return getAs(n.statusAddr, n.name, path, n.c.ca, nil) }

// getAs is the status code of GET path of the server named name at
// address (a manager or a dump server of database ca), as creds say (nil:
// with no client certificate, as the kubelet's probes); 0 when the
// connection fails (a handshake the server refuses).
func getAs(address, name, path string, ca *pkitest.Database, creds *api.Credentials) int {
	config := &tls.Config{RootCAs: pki.Pool(ca.CA.Cert), ServerName: name}
	if creds != nil {
		config = creds.TLSConfig(name)
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: config}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + address + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus polls the status until cond holds, failing after timeout with
// the last status seen.
func (n *node) waitStatus(timeout time.Duration, what string, cond func(api.Status) bool) api.Status {
	t := n.c.t
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last api.Status
	var lastErr error
	for time.Now().Before(deadline) {
		if !n.running() {
			code := "not started"
			if p := n.process(); p != nil {
				code = fmt.Sprintf("code %d", p.ExitCode())
			}
			t.Fatalf("%s: the manager exited (%s) while waiting for %s", n.name, code, what)
		}
		s, err := n.status()
		if err == nil && cond(s) {
			return s
		}
		last, lastErr = s, err
		time.Sleep(25 * time.Millisecond)
	}
	b, _ := json.Marshal(last)
	t.Fatalf("%s: no %s within %s; last status %s (err %v)", n.name, what, timeout, b, lastErr)
	return last
}

func (n *node) waitReady(timeout time.Duration, role api.Role) api.Status {
	n.c.t.Helper()
	s := n.waitStatus(timeout, "ready "+string(role), func(s api.Status) bool { return s.Ready && s.Role == role })
	if code := n.get(api.PathReadyz); code != http.StatusOK {
		n.c.t.Fatalf("%s: /v1/status says ready but /readyz answers %d", n.name, code)
	}
	return s
}

// app opens the application user's pool on n.
func (n *node) app() *sql.DB {
	n.c.t.Helper()
	return n.openAs(n.c.secrets[instance.SecretUsername], n.c.secrets[instance.SecretPassword])
}

func (n *node) openAs(user, password string) *sql.DB {
	t := n.c.t
	t.Helper()
	db, err := n.c.spec.openApp(n.host, n.port, user, password, n.c.secrets[instance.SecretDatabase])
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	return db
}

func (n *node) logSize() int64 {
	fi, err := os.Stat(n.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// dataBytes is the size of the engine's data directory on disk.
func (n *node) dataBytes() int64 {
	var total int64
	_ = filepath.WalkDir(filepath.Join(n.dataRoot, n.c.spec.dataSubdir), func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}

// cloneSeconds is what the manager logged as its last clone's duration.
func (n *node) cloneSeconds() string {
	lines := strings.Split(n.logSince(0), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "msg=cloned ") {
			if _, v, ok := strings.Cut(lines[i], " seconds="); ok {
				f, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				return fmt.Sprintf("%.2fs", f)
			}
		}
	}
	return "?"
}

func (n *node) logSince(off int64) string {
	b, _ := os.ReadFile(n.logPath)
	if off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}
