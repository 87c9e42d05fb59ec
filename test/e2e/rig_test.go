//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/databasepod"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/test/instanceproc"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// rigEngine is how the rig runs one engine from Debian's packages.
type rigEngine struct {
	name, osUser, binDir string
	port                 int
}

var (
	rigPostgres = rigEngine{name: "postgres", osUser: "postgres", binDir: "/usr/lib/postgresql/15/bin", port: 5432}
	rigMariaDB  = rigEngine{name: "mariadb", osUser: "mysql", port: 3306}
)

// rig plays the kubelet for the pods of one MyDatabase: kwok keeps the Pod
// objects (and gives each a loopback IP); for every pod the rig runs a real
// mydb-instance process serving on that IP, as the engine's user, with the
// pod's data claim as a directory of its own. Like a pod, the process reads
// its topology from the MyDatabase with a token of the database's instance
// ServiceAccount, through kube-apiserver's aggregation layer, and mydb's
// controller reads it at the pod IP and api.Port: one code path, here and in a cluster.
type rig struct {
	t        *testing.T
	kube     kubernetes.Interface
	ns, db   string
	engine   rigEngine
	dir      string
	uid, gid int

	mu    sync.Mutex
	procs map[string]*rigProcess // by pod name
	// starts counts the processes started for each pod name.
	starts map[string]int
	// waiting are the pods whose IP another process still holds, with that
	// process's owner, as last logged.
	waiting map[string]string
	stop    chan struct{}
	done    chan struct{}
	// secretsVersion is the resourceVersions of the Secrets projected last.
	secretsVersion string
}

type rigProcess struct {
	ip string
	// uid is the pod's: a pod deleted and made anew under its name (a
	// rolling update) gets a new process, as the kubelet gives it new
	// containers, even when the rig never saw it gone.
	uid types.UID
	*instanceproc.Process
	// enginePIDs are the engine's processes, found when it is frozen.
	enginePIDs []int
}

// podIPs are the loopback pod IPs on which a process of a rig (an
// instance manager, a dump server) still serves, by IP: "namespace/pod"
// of the process. kwok hands a deleted pod's IP to the next pod it
// readies, of any namespace, at once, while the process the rig ran for
// the deleted pod may take seconds to stop. With the tests in parallel,
// that next pod may be another test's: its rig waits until the IP is
// free rather than start a process that could not bind it.
var podIPs = struct {
	sync.Mutex
	held map[string]string
}{held: map[string]string{}}

// holdPodIP records that owner's process is to serve on ip; when another
// process still does, it returns that one's owner and false.
func holdPodIP(ip, owner string) (string, bool) {
	podIPs.Lock()
	defer podIPs.Unlock()
	if holder, held := podIPs.held[ip]; held && holder != owner {
		return holder, false
	}
	podIPs.held[ip] = owner
	return owner, true
}

// releasePodIP records that owner's process on ip has exited.
func releasePodIP(ip, owner string) {
	podIPs.Lock()
	defer podIPs.Unlock()
	if podIPs.held[ip] == owner {
		delete(podIPs.held, ip)
	}
}

// startRig runs the instances of database db in ns until the test ends.
// The database must exist: its Secret and ServiceAccount come from mydb.
func startRig(t *testing.T, ns, db string, engine rigEngine) *rig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the rig runs the engines as their own users and must run as root (as CI does)")
	}
	u, err := user.Lookup(engine.osUser)
	if err != nil {
		t.Fatalf("user %s: %v (hack/install-deps.sh installs the engines)", engine.osUser, err)
	}
	r := &rig{t: t, kube: kubeClient(t), ns: ns, db: db, engine: engine,
		procs: map[string]*rigProcess{}, starts: map[string]int{}, waiting: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	r.uid, _ = strconv.Atoi(u.Uid)
	r.gid, _ = strconv.Atoi(u.Gid)
	r.dir, err = os.MkdirTemp("", "mydb-rig-"+db+"-")
	if err != nil {
		t.Fatal(err)
	}
	r.mustChown(r.dir, 0o755)
	r.writeSecrets()
	r.writeKubeconfig()
	go r.loop()
	t.Cleanup(r.shutdown)
	return r
}

// chown gives path to the engine's user with mode. It returns its error
// rather than failing the test: the rig's loop calls it off the test's
// goroutine, holding the rig's mutex.
func (r *rig) chown(path string, mode os.FileMode) error {
	if err := os.Chmod(path, mode); err != nil {
		return err
	}
	return os.Chown(path, r.uid, r.gid)
}

// mustChown is chown on the test's goroutine.
func (r *rig) mustChown(path string, mode os.FileMode) {
	r.t.Helper()
	if err := r.chown(path, mode); err != nil {
		r.t.Fatal(err)
	}
}

// writeSecrets projects the database's Secrets into files, as the
// kubelet does for the pod's projected volume, and waits until there are
// some.
func (r *rig) writeSecrets() {
	eventually(r.t, time.Minute, func() error {
		_, err := r.projectSecrets()
		return err
	})
}

// projectSecrets writes the instance Secret's passwords and the
// certificates Secret into a new directory and points the secrets
// symlink at it, as the kubelet updates a projected volume (a reader sees
// the old set or the new, never a mix); it does so only when either
// Secret changed since the last time. It returns its error rather than
// failing the test: the rig's loop calls it.
func (r *rig) projectSecrets() (bool, error) {
	ctx := context.Background()
	instance, err := r.kube.CoreV1().Secrets(r.ns).Get(ctx, names.InstanceSecret(r.db), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	certificates, err := r.kube.CoreV1().Secrets(r.ns).Get(ctx, names.CertificatesSecret(r.db), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	version := instance.ResourceVersion + "-" + certificates.ResourceVersion
	if version == r.secretsVersion {
		return false, nil
	}
	dir := filepath.Join(r.dir, "secrets-"+version)
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return false, err
	}
	if err := r.chown(dir, 0o700); err != nil {
		return false, err
	}
	data := map[string][]byte{}
	for _, key := range []string{engine.SecretKeyUsername, engine.SecretKeyPassword, engine.SecretKeyDatabase,
		engine.SecretKeySuperuserPassword, engine.SecretKeyReplicationPassword} {
		data[key] = instance.Data[key]
	}
	maps.Copy(data, certificates.Data)
	for k, v := range data {
		path := filepath.Join(dir, k)
		if err := os.WriteFile(path, v, 0o400); err != nil {
			return false, err
		}
		if err := r.chown(path, 0o400); err != nil {
			return false, err
		}
	}
	link := filepath.Join(r.dir, "secrets")
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(dir, tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, link); err != nil {
		return false, err
	}
	r.secretsVersion = version
	return true, nil
}

// writeKubeconfig gives the instances a token of the database's instance
// ServiceAccount, as the pod's projected token.
func (r *rig) writeKubeconfig() {
	var token *authenticationv1.TokenRequest
	eventually(r.t, time.Minute, func() (err error) {
		token, err = r.kube.CoreV1().ServiceAccounts(r.ns).CreateToken(context.Background(), r.db+"-instance",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		return err
	})
	cfg := restConfig(r.t)
	ca := filepath.Join(r.dir, "ca.crt")
	data := cfg.CAData
	if len(data) == 0 {
		var err error
		if data, err = os.ReadFile(cfg.CAFile); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := os.WriteFile(ca, data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: instance, user: {token: %q}}]
contexts: [{name: instance, context: {cluster: local, user: instance}}]
current-context: instance
`, cfg.Host, ca, token.Status.Token)
	path := filepath.Join(r.dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o400); err != nil {
		r.t.Fatal(err)
	}
	r.mustChown(path, 0o400)
}

// loop makes the running processes match the pods: a pod with an IP gets
// one, a pod that is gone (or got another IP) loses its.
func (r *rig) loop() {
	defer close(r.done)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	selector := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": r.db}).String()
	lastProjected := time.Now()
	for {
		pods, err := r.kube.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			want := map[string]string{}
			byName := map[string]*corev1.Pod{}
			for i, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.PodIP != "" && strings.HasPrefix(p.Status.PodIP, "127.") {
					want[p.Name] = p.Status.PodIP
					byName[p.Name] = &pods.Items[i]
				}
			}
			r.mu.Lock()
			for name, proc := range r.procs {
				if pod := byName[name]; want[name] != proc.ip || pod == nil || pod.UID != proc.uid {
					r.stopProcess(name, proc)
				}
			}
			for name, ip := range want {
				if _, running := r.procs[name]; !running {
					r.startProcess(byName[name], ip)
				}
			}
			r.mu.Unlock()
		}
		if time.Since(lastProjected) > time.Second {
			// The kubelet updates a projected volume about a minute after
			// its Secret changes; the rig does it within a second.
			if changed, err := r.projectSecrets(); err != nil {
				r.t.Logf("rig %s/%s: projecting the Secrets: %v", r.ns, r.db, err)
			} else if changed {
				r.t.Logf("rig %s/%s: the Secrets changed; projected them anew", r.ns, r.db)
			}
			lastProjected = time.Now()
		}
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// startProcess runs the database container of pod as the kubelet would,
// with the pod's own command, arguments and environment (instanceCommand),
// serving on ip; its data directory is the pod's claim's, so it outlives
// the process as the claim outlives the pod. It runs on the rig's loop
// with r.mu held: errors fail the test without stopping the loop.
func (r *rig) startProcess(pod *corev1.Pod, ip string) {
	name := pod.Name
	owner := r.ns + "/" + name
	if holder, ok := holdPodIP(ip, owner); !ok {
		if r.waiting[name] != holder {
			r.waiting[name] = holder
			r.t.Logf("rig: pod %s waits for %s, the process of pod %s, to free it", name, ip, holder)
		}
		return
	}
	delete(r.waiting, name)
	started := false
	defer func() {
		if !started {
			releasePodIP(ip, owner)
		}
	}()
	claim := filepath.Join(r.dir, "data-"+name)
	run := filepath.Join(r.dir, "run-"+name)
	for _, d := range []string{claim, run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			r.t.Error(err)
			return
		}
		if err := r.chown(d, 0o700); err != nil {
			r.t.Error(err)
			return
		}
	}
	args, env, err := r.instanceCommand(pod, ip, claim, run)
	if err != nil {
		r.t.Errorf("the database container of pod %s: %v", name, err)
		return
	}
	// A fresh volume's root holds lost+found, which must not bother the engines.
	_ = os.Mkdir(filepath.Join(claim, "lost+found"), 0o700)
	p, err := instanceproc.Start(instanceproc.Options{Binary: filepath.Join(repoRoot, "_output", "bin", "mydb-instance"),
		Args: args, Env: env, Dir: run, UID: r.uid, GID: r.gid, Log: filepath.Join(r.dir, name+".log")})
	if err != nil {
		r.t.Errorf("starting the instance of %s: %v", name, err)
		return
	}
	started = true
	go func() {
		<-p.Done()
		releasePodIP(ip, owner)
	}()
	r.procs[name] = &rigProcess{ip: ip, uid: pod.UID, Process: p}
	r.starts[name]++
	r.t.Logf("rig: started the instance of pod %s on %s", name, ip)
}

// instanceCommand is what the kubelet would run for pod's database
// container, on the rig: the container's own arguments, with the flags
// that name the pod's volumes pointing at the rig's directories and the
// status and metrics addresses at ip; --listen-loopback dropped (the rig's instances share
// the host's loopback, a pod has its own); the service account token given
// as a kubeconfig (--kubeconfig); and the engine's binaries where the host
// keeps them (--bin-dir, where they are not on PATH). The environment is
// the container's, downward API fields resolved as the kubelet does.
func (r *rig) instanceCommand(pod *corev1.Pod, ip, claim, run string) (args, env []string, err error) {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == databasepod.DatabaseContainerName })
	if i < 0 {
		return nil, nil, fmt.Errorf("no container %q", databasepod.DatabaseContainerName)
	}
	c := pod.Spec.Containers[i]
	if len(c.Command) != 1 || c.Command[0] != engine.InstanceManager {
		return nil, nil, fmt.Errorf("the command is %q, not the instance manager %q", c.Command, engine.InstanceManager)
	}
	for _, arg := range c.Args {
		flag, value, _ := strings.Cut(arg, "=")
		switch flag {
		case "--data-root":
			arg = flag + "=" + claim
		case "--run-dir":
			arg = flag + "=" + run
		case "--secrets-dir":
			arg = flag + "=" + filepath.Join(r.dir, "secrets")
		case "--status-address", "--metrics-address":
			_, port, err := net.SplitHostPort(value)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", arg, err)
			}
			arg = flag + "=" + net.JoinHostPort(ip, port)
		case "--listen-loopback", "--kubeconfig", "--bin-dir":
			continue
		}
		args = append(args, arg)
	}
	args = append(args, "--kubeconfig="+filepath.Join(r.dir, "kubeconfig"))
	if r.engine.binDir != "" {
		args = append(args, "--bin-dir="+r.engine.binDir)
	}
	env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + run, "LANG=C.UTF-8"}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			switch ref := e.ValueFrom.FieldRef; {
			case ref != nil && ref.FieldPath == "metadata.name":
				value = pod.Name
			case ref != nil && ref.FieldPath == "metadata.namespace":
				value = pod.Namespace
			case ref != nil && ref.FieldPath == "status.podIP":
				value = ip
			case ref != nil && ref.FieldPath == "metadata.uid":
				value = string(pod.UID)
			default:
				return nil, nil, fmt.Errorf("environment variable %s: the rig resolves no such source (%+v)", e.Name, e.ValueFrom)
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return args, env, nil
}

// stopProcess stops an instance the way the kubelet stops a container:
// SIGTERM, then SIGKILL after the grace period; and once the manager (the
// container's PID 1) is gone, whatever it started that is left, as the
// end of a container's PID namespace does (a pg_basebackup of a clone cut
// short would otherwise hold the replica's slot on the primary). r.mu is
// held.
func (r *rig) stopProcess(name string, proc *rigProcess) {
	proc.Stop(30 * time.Second)
	proc.SignalGroup(syscall.SIGKILL)
	delete(r.procs, name)
	r.t.Logf("rig: stopped the instance of pod %s", name)
}

func (r *rig) shutdown() {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, proc := range r.procs {
		r.stopProcess(name, proc)
	}
	if r.t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(r.dir, "*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			r.t.Logf("=== last lines of %s ===\n%s", filepath.Base(l), strings.Join(lines, "\n"))
		}
	}
	_ = os.RemoveAll(r.dir)
}

// kill ends pod's instance as a crash does: SIGKILL to the engine's
// children and its process group (it leads its own), then to the
// manager's, so nothing stops cleanly. The instance stays down until revive.
func (r *rig) kill(pod string) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	proc, ok := r.procs[pod]
	if !ok {
		r.t.Fatalf("rig: no instance runs for pod %s", pod)
	}
	if pid := r.enginePID(pod, proc.ip); pid > 0 {
		// The engine's children are found first and killed after it,
		// which would otherwise restart them.
		instanceproc.SignalEngine(append([]int{pid}, instanceproc.ChildPIDs(pid)...), syscall.SIGKILL)
	}
	proc.SignalGroup(syscall.SIGKILL)
	<-proc.Done()
	r.t.Logf("rig: killed the instance of pod %s (kill -9 of its process groups)", pod)
}

// freeze stops pod's instance where it is (SIGSTOP to the engine's
// process group and the engine's children, which Postgres puts in groups of
// their own, then to the manager's group): it neither answers nor
// replicates until thaw, and keeps everything it had.
func (r *rig) freeze(pod string) {
	r.t.Helper()
	r.signalGroups(pod, syscall.SIGSTOP)
	r.t.Logf("rig: froze the instance of pod %s (SIGSTOP)", pod)
}

// thaw lets a frozen instance go on (SIGCONT to both process groups).
func (r *rig) thaw(pod string) {
	r.t.Helper()
	r.signalGroups(pod, syscall.SIGCONT)
	r.t.Logf("rig: thawed the instance of pod %s (SIGCONT)", pod)
}

func (r *rig) signalGroups(pod string, sig syscall.Signal) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	proc, ok := r.procs[pod]
	if !ok {
		r.t.Fatalf("rig: no instance runs for pod %s", pod)
	}
	// The engine's processes are found before the manager stops answering.
	if sig == syscall.SIGSTOP {
		proc.enginePIDs = nil
		if pid := r.enginePID(pod, proc.ip); pid > 0 {
			proc.enginePIDs = append(instanceproc.ChildPIDs(pid), pid)
		}
	}
	instanceproc.SignalEngine(proc.enginePIDs, sig)
	proc.SignalGroup(sig)
}

// revive lets the rig start pod's instance again, on the data it had.
func (r *rig) revive(pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if proc, ok := r.procs[pod]; ok {
		select {
		case <-proc.Done():
			delete(r.procs, pod)
		default:
			r.t.Errorf("rig: the instance of %s still runs", pod)
		}
	}
}

// managers reads the instance managers at their pods' IPs, as the
// controller does.
var managers = &api.Client{Timeout: 2 * time.Second}

// managerStatus is what the instance manager of pod at ip reports (nil when it
// does not answer).
func managerStatus(t *testing.T, ns, pod, ip string) *api.Status {
	db := pod[:strings.LastIndex(pod, "-")]
	s, _ := managers.Status(context.Background(), ip, api.Auth{Credentials: controllerCredentials(t, ns, db), Name: pod})
	return s
}

// enginePID is the engine's pid as the manager of pod at ip reports it (0 if none).
func (r *rig) enginePID(pod, ip string) int {
	if s := managerStatus(r.t, r.ns, pod, ip); s != nil {
		return s.EnginePID
	}
	return 0
}
