//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/instanceproc"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// dumpRig plays the kubelet for the dump-server pods of a namespace (the
// short-lived pods of volume backups): for every such pod with an IP it
// runs the pod's own command, `mydb-instance dump-server` with the pod's
// flags, serving on the pod's IP, with the claim the pod mounts as a
// directory of the claim's (kept across pods, as a claim outlives the pods
// that mount it) and the Secret it mounts projected into files. It records
// what each pod mounted.
type dumpRig struct {
	t    *testing.T
	kube kubernetes.Interface
	ns   string
	dir  string

	mu    sync.Mutex
	procs map[string]*instanceproc.Process // by pod name
	ips   map[string]string                // the IP each serves on, by pod name
	// mounts are "<pod> <claim> ro|rw" for every pod the rig ran.
	mounts []string
	stop   chan struct{}
	done   chan struct{}
}

// dumpUser is the dump-server pod's runAsUser.
const dumpUser = 65532

func startDumpRig(t *testing.T, ns string) *dumpRig {
	t.Helper()
	dir, err := os.MkdirTemp("", "mydb-dump-rig-")
	if err != nil {
		t.Fatal(err)
	}
	// The dump servers run as the pod's user, which enters its own claim.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &dumpRig{t: t, kube: kubeClient(t), ns: ns, dir: dir, procs: map[string]*instanceproc.Process{}, ips: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	t.Cleanup(r.shutdown)
	return r
}

func (r *dumpRig) loop() {
	defer close(r.done)
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	selector := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/component": "dump"}).String()
	for {
		pods, err := r.kube.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			want := map[string]*corev1.Pod{}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp == nil && strings.HasPrefix(p.Status.PodIP, "127.") {
					want[p.Name] = p
				}
			}
			r.mu.Lock()
			for name, proc := range r.procs {
				if want[name] == nil {
					proc.Stop(30 * time.Second)
					releasePodIP(r.ips[name], r.ns+"/"+name)
					delete(r.procs, name)
					delete(r.ips, name)
					r.t.Logf("dump rig: stopped the dump server of pod %s", name)
				}
			}
			for name, p := range want {
				if _, running := r.procs[name]; !running {
					r.start(p)
				}
			}
			r.mu.Unlock()
		}
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// start runs pod p's dump server. r.mu is held.
func (r *dumpRig) start(p *corev1.Pod) {
	var claim, secret string
	readOnly := false
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			claim, readOnly = v.PersistentVolumeClaim.ClaimName, v.PersistentVolumeClaim.ReadOnly
		case v.Secret != nil:
			secret = v.Secret.SecretName
		}
	}
	c := p.Spec.Containers[0]
	owner := r.ns + "/" + p.Name
	if holder, ok := holdPodIP(p.Status.PodIP, owner); !ok {
		r.t.Logf("dump rig: pod %s waits for %s, the process of pod %s, to free it", p.Name, p.Status.PodIP, holder)
		return
	}
	started := false
	defer func() {
		if !started {
			releasePodIP(p.Status.PodIP, owner)
		}
	}()
	if claim == "" || secret == "" || len(c.Args) == 0 || c.Args[0] != "dump-server" {
		r.t.Errorf("dump rig: pod %s is no dump server: %v %v", p.Name, c.Args, p.Spec.Volumes)
		return
	}
	claimDir := filepath.Join(r.dir, "claim-"+claim)
	secretsDir := filepath.Join(r.dir, "secrets-"+p.Name)
	for _, d := range []string{claimDir, secretsDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			r.t.Error(err)
			return
		}
		_ = os.Chown(d, dumpUser, dumpUser)
	}
	s, err := r.kube.CoreV1().Secrets(r.ns).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		r.t.Logf("dump rig: pod %s waits for its Secret: %v", p.Name, err)
		return
	}
	for k, v := range s.Data {
		path := filepath.Join(secretsDir, k)
		if err := os.WriteFile(path, v, 0o400); err != nil {
			r.t.Error(err)
			return
		}
		_ = os.Chown(path, dumpUser, dumpUser)
	}
	// The pod's flags, but for the paths and address the rig maps.
	args := []string{"dump-server", "--dir=" + claimDir, "--secrets-dir=" + secretsDir, "--address=" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(api.Port))}
	if slices.Contains(c.Args, "--read-only") {
		args = append(args, "--read-only")
	}
	// The container's environment, its downward API fields resolved as
	// the kubelet does (the pod's name and IP name its certificate).
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, e := range c.Env {
		value := e.Value
		if ref := e.ValueFrom; ref != nil {
			switch {
			case ref.FieldRef != nil && ref.FieldRef.FieldPath == "metadata.name":
				value = p.Name
			case ref.FieldRef != nil && ref.FieldRef.FieldPath == "status.podIP":
				value = p.Status.PodIP
			default:
				r.t.Errorf("dump rig: pod %s: environment variable %s from %+v, which the rig does not resolve", p.Name, e.Name, ref)
				return
			}
		}
		env = append(env, e.Name+"="+value)
	}
	proc, err := instanceproc.Start(instanceproc.Options{Binary: filepath.Join(repoRoot, "_output", "bin", "mydb-instance"),
		Args: args, Env: env, UID: dumpUser, GID: dumpUser, Log: filepath.Join(r.dir, p.Name+".log")})
	if err != nil {
		r.t.Errorf("dump rig: starting the dump server of %s: %v", p.Name, err)
		return
	}
	started = true
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	r.procs[p.Name] = proc
	r.ips[p.Name] = p.Status.PodIP
	r.mounts = append(r.mounts, fmt.Sprintf("%s %s %s", p.Name, claim, mode))
	r.t.Logf("dump rig: started the dump server of pod %s on %s (claim %s, %s)", p.Name, p.Status.PodIP, claim, mode)
}

func (r *dumpRig) mounted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mounts)
}

func (r *dumpRig) shutdown() {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, proc := range r.procs {
		proc.Stop(30 * time.Second)
		releasePodIP(r.ips[name], r.ns+"/"+name)
	}
	if r.t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(r.dir, "*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			r.t.Logf("=== %s ===\n%s", filepath.Base(l), data)
		}
	}
	_ = os.RemoveAll(r.dir)
}

// TestVolumeBackupAndRestore, for postgres and mariadb: rows of tricky
// types on a 2-instance database are backed up to a volume destination;
// the backup gets a claim of its own, written by a short-lived dump-server
// pod that is gone once the backup succeeded; a new database restored from
// it (through a read-only dump-server pod, gone once restored) holds the
// same per-table checksums on every instance; no database pod ever mounts
// the claim; deleting the backup deletes its claim.
func TestVolumeBackupAndRestore(t *testing.T) {
	t.Parallel()
	for _, dc := range dataCases {
		t.Run(dc.engine.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			kube := kubeClient(t)
			dumps := startDumpRig(t, ns)
			source := dc.startSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
				Backup: &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{Volume: &examplev1.VolumeDestination{
					StorageSize: ptrQuantity("2Gi")}}}}, 200)
			h, want := source.h, source.sums
			dc.waitSums(t, h, 2, want)

			start := time.Now()
			if r := kubectlMydb(t, "backup", "src", "-n", ns, "--name", "snap", "--wait", "5m"); r.err != nil ||
				!strings.Contains(r.stdout, "succeeded: pvc://snap-dump") {
				t.Fatalf("kubectl mydb backup:\n%s", r)
			}
			snap := waitBackup(t, ns, "snap", time.Minute)
			s := snap.Status
			t.Logf("%s: volume backup of %s (%s): %d bytes, sha256 %s, in %s (status %s)", dc.engine.name, s.Instance, s.Role,
				s.SizeBytes, s.Checksum, time.Since(start).Round(100*time.Millisecond), s.CompletionTime.Sub(s.StartTime.Time))
			if s.Location == nil || s.Location.Volume == nil || s.Location.Volume.ClaimName != "snap-dump" || s.SizeBytes <= 0 || len(s.Checksum) != 64 {
				t.Fatalf("backup status %+v", s)
			}
			claim, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "snap-dump", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(claim.OwnerReferences) != 0 || claim.Labels["app.kubernetes.io/managed-by"] != "mydb" ||
				!claim.Spec.Resources.Requests.Storage().Equal(quantity("2Gi")) {
				t.Errorf("the backup's claim: owners %v, labels %v, size %v", claim.OwnerReferences, claim.Labels, claim.Spec.Resources.Requests.Storage())
			}
			if out := mustKubectl(t, "", "get", "mdbb", "snap", "-n", ns, "-o", "wide"); !strings.Contains(out, "pvc://snap-dump") || !strings.Contains(out, s.Checksum) {
				t.Errorf("kubectl get mdbb -o wide:\n%s\nwant the claim and the checksum", out)
			} else {
				t.Logf("kubectl get mdbb -o wide:\n%s", out)
			}
			// Mounted only while the backup ran.
			podGone(t, ns, "snap-dump")

			start = time.Now()
			if r := kubectlMydb(t, "restore", "snap", "--to", "copy", "-n", ns); r.err != nil {
				t.Fatalf("kubectl mydb restore:\n%s", r)
			}
			startRig(t, ns, "copy", dc.engine)
			loaded := restored(t, ns, "copy", 5*time.Minute)
			copyH := &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}
			copyH.waitStreaming(2)
			t.Logf("%s: restored %d bytes from the volume into copy in %s, 2 instances streaming after %s", dc.engine.name, s.SizeBytes,
				loaded.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
			dc.waitSums(t, copyH, 2, want)
			podGone(t, ns, "copy-restore")

			if got, wantMounts := dumps.mounted(), []string{"snap-dump snap-dump rw", "copy-restore snap-dump ro"}; !slices.Equal(got, wantMounts) {
				t.Errorf("dump-server pods run: %v, want %v", got, wantMounts)
			}
			// No pod of either database mounts the backup's claim.
			for _, db := range []string{"src", "copy"} {
				sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, db, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range sts.Spec.Template.Spec.Volumes {
					if v.PersistentVolumeClaim != nil {
						t.Errorf("the pods of %s mount the claim %s", db, v.PersistentVolumeClaim.ClaimName)
					}
				}
			}

			// Deleting the backup deletes its claim, like a bucket's object.
			mustKubectl(t, "", "delete", "mdbb/snap", "-n", ns, "--timeout=1m")
			eventually(t, reconcileTimeout, func() error {
				if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "snap-dump", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the claim snap-dump is still there: %v", err)
				}
				return nil
			})
		})
	}
}
