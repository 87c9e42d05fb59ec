package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// scenarioPopulation fills one namespace with -list-n MyDatabases (straight
// at mydb, so kube-apiserver sees none of it) and another with as many
// custom resources, measuring each server's memory growth; then it measures
// LIST and GET on those objects.
func (e *env) scenarioPopulation(ctx context.Context) error {
	n := e.o.listN
	nsDB, err := e.namespace(ctx, "list-mdb")
	if err != nil {
		return err
	}
	nsCR, err := e.namespace(ctx, "list-crd")
	if err != nil {
		return err
	}
	// A server grows some things once, on first use (the watch cache's event
	// window, the field manager's type converters, pools): fill and empty
	// both namespaces once, so that the growth measured next is the
	// objects' and not the warm-up's.
	for ns, t := range map[string]string{nsDB: tDirect, nsCR: tCRD} {
		if _, _, err := runCreates(ctx, e.targets[t], ns, "warm", n, e.o.concurrency); err != nil {
			return fmt.Errorf("warming up: %w", err)
		}
		e.waitControllerIdle(ctx)
		if err := e.targets[t].deleteAll(ctx, ns); err != nil {
			return err
		}
	}
	e.waitControllerIdle(ctx)
	m0, err := e.memSample(ctx)
	if err != nil {
		return err
	}
	if _, _, err := runCreates(ctx, e.targets[tDirect], nsDB, "obj", n, e.o.concurrency); err != nil {
		return fmt.Errorf("creating %d MyDatabases: %w", n, err)
	}
	e.waitControllerIdle(ctx)
	m1, err := e.memSample(ctx)
	if err != nil {
		return err
	}
	if _, _, err := runCreates(ctx, e.targets[tCRD], nsCR, "obj", n, e.o.concurrency); err != nil {
		return fmt.Errorf("creating %d custom resources: %w", n, err)
	}
	time.Sleep(2 * time.Second)
	m2, err := e.memSample(ctx)
	if err != nil {
		return err
	}
	for _, kind := range []string{"rss", "heap"} {
		e.res.add("memory/mydb/"+kind, m1["mydb-apiserver/"+kind]-m0["mydb-apiserver/"+kind])
		e.res.add("memory/kube/"+kind, m2["kube-apiserver/"+kind]-m1["kube-apiserver/"+kind])
		// controls: each server while the other one was being filled
		e.res.add("memory/kube-during-mdb/"+kind, m1["kube-apiserver/"+kind]-m0["kube-apiserver/"+kind])
		e.res.add("memory/mydb-during-crd/"+kind, m2["mydb-apiserver/"+kind]-m1["mydb-apiserver/"+kind])
		e.res.add("memory/base/mydb/"+kind, m0["mydb-apiserver/"+kind])
		e.res.add("memory/base/kube/"+kind, m0["kube-apiserver/"+kind])
	}
	e.logf("memory growth for %d objects: mydb-apiserver RSS %s (heap %s), kube-apiserver RSS %s (heap %s)", n,
		fmtBytes(m1["mydb-apiserver/rss"]-m0["mydb-apiserver/rss"]), fmtBytes(m1["mydb-apiserver/heap"]-m0["mydb-apiserver/heap"]),
		fmtBytes(m2["kube-apiserver/rss"]-m1["kube-apiserver/rss"]), fmtBytes(m2["kube-apiserver/heap"]-m1["kube-apiserver/heap"]))
	e.heapProfile(ctx, "heap-mydb-apiserver")

	if err := e.measureLists(ctx, nsDB, nsCR); err != nil {
		return err
	}
	e.profileLists(ctx, nsDB)
	if err := e.measureGets(ctx, nsDB, nsCR); err != nil {
		return err
	}
	for ns, t := range map[string]string{nsDB: tDirect, nsCR: tCRD} {
		if err := e.targets[t].deleteAll(ctx, ns); err != nil {
			return err
		}
	}
	e.waitControllerIdle(ctx)
	return nil
}

// listVariant is one way of listing the population.
type listVariant struct {
	key    string
	c      rest.Interface
	path   string
	accept string
	limit  int
	// gzip asks for a compressed response, as client-go and kubectl do
	// by default; bytes are then the compressed ones.
	gzip bool
}

const (
	acceptJSON  = runtime.ContentTypeJSON
	acceptProto = runtime.ContentTypeProtobuf
)

var listTitles = map[string]string{
	"agg-proto":       "MyDatabase via aggregator, protobuf",
	"agg-json":        "MyDatabase via aggregator, JSON",
	"direct-proto":    "MyDatabase direct, protobuf",
	"direct-json":     "MyDatabase direct, JSON",
	"agg-proto-paged": "MyDatabase via aggregator, protobuf, limit=500",
	"crd-json":        "CRD, JSON",
	"crd-json-paged":  "CRD, JSON, limit=500",
	"agg-proto-gzip":  "MyDatabase via aggregator, protobuf, gzip",
	"crd-json-gzip":   "CRD, JSON, gzip",
}

var listOrder = []string{"agg-proto", "agg-json", "direct-proto", "direct-json", "agg-proto-paged", "crd-json", "crd-json-paged", "agg-proto-gzip", "crd-json-gzip"}

func (e *env) measureLists(ctx context.Context, nsDB, nsCR string) error {
	mdbPath := "/apis/example.com/v1/namespaces/" + nsDB + "/mydatabases"
	crdPath := "/apis/crd.example.com/v1/namespaces/" + nsCR + "/mydatabases"
	variants := map[string]listVariant{
		"agg-proto":       {c: e.kubeREST, path: mdbPath, accept: acceptProto},
		"agg-json":        {c: e.kubeREST, path: mdbPath, accept: acceptJSON},
		"direct-proto":    {c: e.directREST, path: mdbPath, accept: acceptProto},
		"direct-json":     {c: e.directREST, path: mdbPath, accept: acceptJSON},
		"agg-proto-paged": {c: e.kubeREST, path: mdbPath, accept: acceptProto, limit: 500},
		"crd-json":        {c: e.kubeREST, path: crdPath, accept: acceptJSON},
		"crd-json-paged":  {c: e.kubeREST, path: crdPath, accept: acceptJSON, limit: 500},
		"agg-proto-gzip":  {c: e.kubeREST, path: mdbPath, accept: acceptProto, gzip: true},
		"crd-json-gzip":   {c: e.kubeREST, path: crdPath, accept: acceptJSON, gzip: true},
	}
	for rep := -1; rep < e.o.listReps; rep++ { // rep -1 warms up
		for _, key := range rotate(listOrder, rep+1) {
			v := variants[key]
			d, size, pages, items, err := rawList(ctx, v)
			if err != nil {
				return fmt.Errorf("LIST %s: %w", key, err)
			}
			if items != e.o.listN {
				return fmt.Errorf("LIST %s returned %d items, want %d", key, items, e.o.listN)
			}
			if rep < 0 {
				continue
			}
			e.res.add("list/"+key+"/ms", ms(d))
			e.res.add("list/"+key+"/bytes", float64(size))
			e.res.add("list/"+key+"/pages", float64(pages))
		}
	}
	for _, key := range listOrder {
		v, _ := e.res.med("list/" + key + "/ms")
		b, _ := e.res.med("list/" + key + "/bytes")
		e.logf("LIST %d %-16s %s, %s", e.o.listN, key, fmtMs(v), fmtBytes(b))
	}
	return nil
}

// profileLists CPU-profiles kube-apiserver and mydb-apiserver while one
// client lists the MyDatabases through the aggregator, then mydb-apiserver
// while it lists them straight: what one LIST costs in each process, and
// what the aggregator's hop is made of.
func (e *env) profileLists(ctx context.Context, nsDB string) {
	if e.o.profileDir == "" {
		return
	}
	if err := os.MkdirAll(e.o.profileDir, 0o755); err != nil {
		e.logf("%v", err)
		return
	}
	path := "/apis/example.com/v1/namespaces/" + nsDB + "/mydatabases"
	for _, run := range []struct {
		name    string
		c       rest.Interface
		servers map[string]rest.Interface
	}{
		{"list-aggregated", e.kubeREST, map[string]rest.Interface{"kube-apiserver": e.kubeREST, "mydb-apiserver": e.directREST}},
		{"list-direct", e.directREST, map[string]rest.Interface{"mydb-apiserver": e.directREST}},
	} {
		lctx, stop := context.WithCancel(ctx)
		var lists atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for lctx.Err() == nil {
				if _, _, _, _, err := rawList(lctx, listVariant{c: run.c, path: path, accept: acceptProto}); err == nil {
					lists.Add(1)
				}
			}
		}()
		time.Sleep(time.Second)
		before := lists.Load()
		var wg sync.WaitGroup
		for server, c := range run.servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.cpuProfile(ctx, c, run.name, server)
			}()
		}
		wg.Wait()
		e.res.add("profile/"+run.name+"/ops", float64(lists.Load()-before))
		stop()
		<-done
		e.logf("profiled %s (%d LISTs)", run.name, lists.Load())
	}
}

// rawList lists a collection (page by page when v.limit is set) and returns
// the time requests were out (each from sending to the last byte of the
// response), the bytes received, the number of pages and of items.
func rawList(ctx context.Context, v listVariant) (time.Duration, int, int, int, error) {
	var elapsed time.Duration
	var size, pages, items int
	cont := ""
	for {
		req := v.c.Get().AbsPath(v.path).SetHeader("Accept", v.accept)
		if v.gzip {
			// Set by hand, so the transport leaves the body compressed.
			req = req.SetHeader("Accept-Encoding", "gzip")
		}
		if v.limit > 0 {
			req = req.Param("limit", fmt.Sprint(v.limit))
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		t0 := time.Now()
		raw, err := req.DoRaw(ctx)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		// the clock runs only while a request is out: reading the continue
		// token needs a decode, which is the client's cost, not the server's
		elapsed += time.Since(t0)
		size += len(raw)
		pages++
		if v.gzip {
			if raw, err = gunzip(raw); err != nil {
				return 0, 0, 0, 0, err
			}
		}
		n, next, err := countItems(raw, v.accept)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		items += n
		if v.limit == 0 || next == "" {
			return elapsed, size, pages, items, nil
		}
		cont = next
	}
}

// gunzip inflates a response that was asked for compressed; one too small
// for the server to compress comes as it is.
func gunzip(raw []byte) ([]byte, error) {
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		return raw, nil
	}
	r, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// countItems decodes a list response enough to count its items and read
// its continue token.
func countItems(raw []byte, accept string) (int, string, error) {
	if accept == acceptProto {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
		if err != nil {
			return 0, "", err
		}
		l, ok := obj.(*examplev1.MyDatabaseList)
		if !ok {
			return 0, "", fmt.Errorf("decoded a %T", obj)
		}
		return len(l.Items), l.Continue, nil
	}
	var l struct {
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
		Items []struct{} `json:"items"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		return 0, "", err
	}
	return len(l.Items), l.Metadata.Continue, nil
}

// measureGets reads random objects of the population one at a time.
func (e *env) measureGets(ctx context.Context, nsDB, nsCR string) error {
	ns := map[string]string{tAggregated: nsDB, tDirect: nsDB, tCRD: nsCR}
	names := []string{tAggregated, tDirect, tCRD}
	for rep := -1; rep < e.o.reps; rep++ {
		for _, tn := range rotate(names, rep+1) {
			count := e.o.getN
			if rep < 0 {
				count = 50
			}
			lats := make([]time.Duration, 0, count)
			for i := 0; i < count; i++ {
				name := fmt.Sprintf("obj-%05d", rand.IntN(e.o.listN))
				t0 := time.Now()
				if err := e.targets[tn].get(ctx, ns[tn], name); err != nil {
					return fmt.Errorf("GET %s %s: %w", tn, name, err)
				}
				lats = append(lats, time.Since(t0))
			}
			if rep >= 0 {
				e.res.addLatencies("get/"+tn, lats)
			}
		}
	}
	for _, tn := range names {
		p50, _ := e.res.med("get/" + tn + "/p50")
		p99, _ := e.res.med("get/" + tn + "/p99")
		e.logf("GET %-10s p50 %s p99 %s", tn, fmtMs(p50), fmtMs(p99))
	}
	return nil
}
