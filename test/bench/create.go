package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mydb-dev/mydb/test/stats"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// runCreates creates n objects named prefix-00000... from conc clients and
// returns the rate (objects per second over the whole run) and each
// request's latency.
func runCreates(ctx context.Context, t target, ns, prefix string, n, conc int) (float64, []time.Duration, error) {
	lats := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < conc; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := t.create(ctx, ns, fmt.Sprintf("%s-%05d", prefix, i)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				lats[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), lats, firstErr
}

// sumMetric adds up every series of a metric, whatever its labels.
func sumMetric(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// scenarioCreate measures create rate and latency at 1 and -concurrency
// clients for every target, interleaved and rotated per repetition.
func (e *env) scenarioCreate(ctx context.Context) error {
	names := []string{tAggregated, tDirect, tCRD, tEtcd}
	nss := map[string]string{tEtcd: "create"}
	for _, tn := range names[:3] {
		ns, err := e.namespace(ctx, "create-"+tn)
		if err != nil {
			return err
		}
		nss[tn] = ns
	}
	n := e.o.createN
	for rep := 0; rep < e.o.reps; rep++ {
		for _, conc := range []int{1, e.o.concurrency} {
			for _, tn := range rotate(names, rep) {
				t := e.targets[tn]
				key := fmt.Sprintf("create/c%d/%s", conc, tn)
				m0, _ := metrics(ctx, e.directREST)
				before := e.cpu()
				rate, lats, err := runCreates(ctx, t, nss[tn], fmt.Sprintf("c%d-r%d", conc, rep), n, conc)
				if err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
				// mydb's controller writes a status for each new object; let it
				// finish inside the accounted window, for every target alike.
				e.waitControllerIdle(ctx)
				after := e.cpu()
				m1, _ := metrics(ctx, e.directREST)
				e.res.add(key+"/rate", rate)
				e.res.addLatencies(key, lats)
				e.recordCPU("cpu/"+key, before, after, n)
				if tn == tAggregated || tn == tDirect {
					sars := sumMetric(m1, "apiserver_delegated_authz_request_total") - sumMetric(m0, "apiserver_delegated_authz_request_total")
					e.res.add("sar/"+key, sars)
				}
				e.logf("create %-10s c=%-2d rep %d: %7.0f/s p50 %s p99 %s", tn, conc, rep, rate,
					fmtMs(ms(stats.Percentile(lats, 50))), fmtMs(ms(stats.Percentile(lats, 99))))
				if err := t.deleteAll(ctx, nss[tn]); err != nil {
					return fmt.Errorf("cleaning %s: %w", key, err)
				}
				e.waitControllerIdle(ctx)
			}
		}
	}
	return nil
}

// measureStoredSizes creates one object of each kind and reads what the
// two etcds hold for it; the raw etcd target then writes values of the size
// mydb stores.
func (e *env) measureStoredSizes(ctx context.Context) error {
	ns, err := e.namespace(ctx, "sizes")
	if err != nil {
		return err
	}
	if err := e.targets[tDirect].create(ctx, ns, "probe-00000"); err != nil {
		return err
	}
	if err := e.targets[tCRD].create(ctx, ns, "probe-00000"); err != nil {
		return err
	}
	e.waitControllerIdle(ctx)
	size := func(c *clientv3.Client, prefix string) (int, error) {
		suffix := "/" + ns + "/probe-00000"
		var found int
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				return false, nil
			}
			for _, kv := range resp.Kvs {
				if strings.HasSuffix(string(kv.Key), suffix) && strings.Contains(string(kv.Key), "mydatabases") {
					got, err := c.Get(ctx, string(kv.Key))
					if err != nil || len(got.Kvs) == 0 {
						return false, nil
					}
					found = len(got.Kvs[0].Value)
					return true, nil
				}
			}
			return false, nil
		})
		return found, err
	}
	mdb, err := size(e.mydbEtcd, "/registry/mydb/")
	if err != nil {
		return fmt.Errorf("finding the MyDatabase in mydb's etcd: %w", err)
	}
	cr, err := size(e.clusterEtcd, "/registry/crd.example.com/")
	if err != nil {
		return fmt.Errorf("finding the custom resource in the cluster's etcd: %w", err)
	}
	e.res.add("size/request", float64(objectSize))
	e.res.add("size/stored/mydb", float64(mdb))
	e.res.add("size/stored/crd", float64(cr))
	e.targets[tEtcd].(*etcdTarget).value = strings.Repeat("v", mdb)
	e.logf("object sizes: request %d B (JSON), stored by mydb %d B (protobuf, with its defaults; paused, so no status), stored for the CRD %d B (JSON)", objectSize, mdb, cr)
	return nil
}

// scenarioProfile runs creates from -concurrency clients through the
// aggregator, and then against the CRD, while taking CPU profiles of the
// servers involved, and keeps pprof's top entries for the report.
func (e *env) scenarioProfile(ctx context.Context) error {
	if err := os.MkdirAll(e.o.profileDir, 0o755); err != nil {
		return err
	}
	ns, err := e.namespace(ctx, "profile")
	if err != nil {
		return err
	}
	servers := map[string]rest.Interface{"kube-apiserver": e.kubeREST, "mydb-apiserver": e.directREST}
	for _, tn := range []string{tAggregated, tCRD} {
		t := e.targets[tn]
		lctx, stop := context.WithCancel(ctx)
		var created atomic.Int64
		var wg sync.WaitGroup
		for c := 0; c < e.o.concurrency; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for lctx.Err() == nil {
					i := created.Add(1)
					if err := t.create(lctx, ns, fmt.Sprintf("prof-%s-%d-%06d", tn[:3], c, i)); err != nil && lctx.Err() == nil && !errors.Is(err, context.Canceled) {
						e.logf("profile load: %v", err)
						time.Sleep(100 * time.Millisecond)
					}
				}
			}()
		}
		time.Sleep(time.Second)
		opsBefore := created.Load()
		var pw sync.WaitGroup
		for server, c := range servers {
			if tn == tCRD && server == "mydb-apiserver" {
				continue
			}
			pw.Add(1)
			go func() {
				defer pw.Done()
				e.cpuProfile(ctx, c, tn, server)
			}()
		}
		pw.Wait()
		e.res.add("profile/"+tn+"/ops", float64(created.Load()-opsBefore))
		stop()
		wg.Wait()
		e.logf("profiled %s creates (%d objects)", tn, created.Load())
		if err := t.deleteAll(ctx, ns); err != nil {
			return err
		}
		e.waitControllerIdle(ctx)
	}
	return nil
}

// cpuProfile saves a CPU profile of -profile-seconds of server (reached
// through c) as the profile of what is named, with its top entries.
func (e *env) cpuProfile(ctx context.Context, c rest.Interface, name, server string) {
	raw, err := c.Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(e.o.profileSeconds)).DoRaw(ctx)
	if err != nil {
		e.logf("profile of %s: %v", server, err)
		return
	}
	file := filepath.Join(e.o.profileDir, fmt.Sprintf("cpu-%s-%s.pb.gz", name, server))
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		e.logf("%v", err)
		return
	}
	e.res.note(fmt.Sprintf("profile/%s/%s/file", name, server), file)
	e.res.note(fmt.Sprintf("profile/%s/%s/top", name, server), pprofTop(file, false, 18))
	e.res.note(fmt.Sprintf("profile/%s/%s/cum", name, server), pprofTop(file, true, 45))
}

// pprofTop runs go tool pprof -top on a profile.
func pprofTop(file string, cum bool, nodes int) string {
	args := []string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", nodes)}
	if cum {
		args = append(args, "-cum")
	}
	out, err := exec.Command("go", append(args, file)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// heapProfile saves mydb-apiserver's heap profile (in-use space).
func (e *env) heapProfile(ctx context.Context, name string) {
	if e.o.profileDir == "" {
		return
	}
	if err := os.MkdirAll(e.o.profileDir, 0o755); err != nil {
		return
	}
	raw, err := e.directREST.Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if err != nil {
		e.logf("heap profile: %v", err)
		return
	}
	file := filepath.Join(e.o.profileDir, name+".pb.gz")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		return
	}
	out, _ := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", "-sample_index=inuse_space", file).CombinedOutput()
	e.res.note("profile/heap/"+name, strings.TrimSpace(string(out)))
}

// cpuBucket is a part of a server's work, found in a CPU profile by the
// cumulative samples of the functions that do it.
type cpuBucket struct {
	title string
	funcs []string
	// aggregatedOnly: the function also wraps local requests, so it means
	// something only where kube-apiserver proxies
	aggregatedOnly bool
}

var cpuBuckets = []cpuBucket{
	{"handler chains of all requests (authn, authz, priority and fairness, routing)", []string{"k8s.io/apiserver/pkg/endpoints/filters.withAuthentication.func1"}, false},
	{"registry work of all creates and updates (finishRequest goroutines)", []string{"k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1"}, false},
	{"the create (generic registry Store.Create)", []string{"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Create"}, false},
	{"the controller's status write, server side (StatusREST.Update)", []string{"github.com/mydb-dev/mydb/pkg/registry/common.(*StatusREST).Update"}, false},
	{"the controller, client side (sync, encode, send)", []string{"github.com/mydb-dev/mydb/pkg/controller/mydatabase.(*Controller).sync"}, false},
	{"in-process informers decoding watch events (controller, quota admission)", []string{"k8s.io/client-go/tools/cache.(*Reflector).watch"}, false},
	{"the aggregator's proxy to mydb", []string{"k8s.io/kube-aggregator/pkg/apiserver.(*proxyHandler).ServeHTTP"}, true},
	{"CRD request decoding and schema coercion", []string{"k8s.io/apiextensions-apiserver/pkg/apiserver.schemaCoercingDecoder.Decode"}, false},
	{"managedFields (field manager)", []string{"k8s.io/apimachinery/pkg/util/managedfields/internal.(*FieldManager).UpdateNoErrors"}, false},
	{"admission chain", []string{"k8s.io/apiserver/pkg/admission.chainAdmissionHandler.Admit", "k8s.io/apiserver/pkg/admission.chainAdmissionHandler.Validate"}, false},
	{"authentication", []string{"k8s.io/apiserver/pkg/authentication/request/union.(*unionAuthRequestHandler).AuthenticateRequest"}, false},
	{"authorization", []string{"k8s.io/apiserver/pkg/authorization/union.unionAuthzHandler.Authorize"}, false},
	{"etcd watch to watch cache (decode)", []string{"k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).prepareObjs"}, false},
	{"watch cache to watchers (dispatch)", []string{"k8s.io/apiserver/pkg/storage/cacher.(*Cacher).dispatchEvents"}, false},
	{"etcd client (gRPC calls and their writer)", []string{"google.golang.org/grpc.(*ClientConn).Invoke", "google.golang.org/grpc/internal/transport.(*loopyWriter).run"}, false},
	{"HTTP/2 server (connection loop, frame writes)", []string{"golang.org/x/net/http2.(*serverConn).serve", "golang.org/x/net/http2.(*serverConn).writeFrameAsync"}, false},
	{"TLS reads and writes", []string{"crypto/tls.(*Conn).Read", "crypto/tls.(*Conn).Write"}, false},
	{"goroutine stack growth (newstack)", []string{"runtime.newstack"}, false},
	{"garbage collection (background mark workers)", []string{"runtime.gcBgMarkWorker"}, false},
	{"memory allocation (mallocgc, overlaps the rows above)", []string{"runtime.mallocgc"}, false},
}

// listBuckets are the parts of a LIST of the population, through the
// aggregator or straight at mydb.
var listBuckets = []cpuBucket{
	{"the LIST (read from the watch cache, encode, write)", []string{"k8s.io/apiserver/pkg/endpoints/handlers.ListResource.func1"}, false},
	{"encoding the list (protobuf)", []string{"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.SerializeObject"}, false},
	{"the aggregator's proxy to mydb", []string{"k8s.io/kube-aggregator/pkg/apiserver.(*proxyHandler).ServeHTTP"}, true},
	{"copying mydb's response to the client (ReverseProxy)", []string{"net/http/httputil.(*ReverseProxy).copyResponse"}, true},
	{"HTTP/2 client reading mydb's response", []string{"golang.org/x/net/http2.(*clientConnReadLoop).run"}, true},
	{"gzip of the response (mydb compresses what the aggregator's transport asked for)", []string{"compress/gzip.(*Writer).Write"}, false},
	{"inflating it again for a client that did not ask for gzip (kube-apiserver)", []string{"golang.org/x/net/http2.(*gzipReader).Read"}, true},
	{"HTTP/2 server (connection loop, frame writes)", []string{"golang.org/x/net/http2.(*serverConn).serve", "golang.org/x/net/http2.(*serverConn).writeFrameAsync"}, false},
	{"TLS reads and writes", []string{"crypto/tls.(*Conn).Read", "crypto/tls.(*Conn).Write"}, false},
	{"garbage collection (background mark workers)", []string{"runtime.gcBgMarkWorker"}, false},
	{"memory allocation (mallocgc, overlaps the rows above)", []string{"runtime.mallocgc"}, false},
}

// profileCum returns a profile's total CPU seconds and each function's
// cumulative CPU seconds.
func profileCum(file string) (float64, map[string]float64, error) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=100000", "-unit=s", file).Output()
	if err != nil {
		return 0, nil, err
	}
	cum := map[string]float64{}
	var total float64
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "Total samples = "); i >= 0 {
			f := strings.Fields(line[i+len("Total samples = "):])
			if len(f) > 0 {
				total = parseSeconds(f[0])
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
			continue
		}
		cum[strings.Join(f[5:], " ")] = parseSeconds(f[3])
	}
	return total, cum, nil
}

func parseSeconds(s string) float64 {
	var v float64
	if strings.HasSuffix(s, "ms") {
		fmt.Sscanf(strings.TrimSuffix(s, "ms"), "%g", &v)
		return v / 1000
	}
	fmt.Sscanf(strings.TrimSuffix(s, "s"), "%g", &v)
	return v
}
