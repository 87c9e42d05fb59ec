package main

import (
	_ "embed"
	"fmt"
	"image/color"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// notes is the hand-written reading of the figures that the report carries
// under the generated tables.
//
//go:embed notes.md
var notes string

type targetRow struct {
	what, measured, ratio string
	pass                  bool
	ok                    bool // measured at all
}

// ratio returns a/b from the medians of two keys.
func (e *env) ratio(a, b string) (float64, bool) {
	x, ok1 := e.res.med(a)
	y, ok2 := e.res.med(b)
	if !ok1 || !ok2 || y == 0 {
		return 0, false
	}
	return x / y, true
}

func (e *env) targets_() []targetRow {
	var rows []targetRow
	c := e.o.concurrency
	for _, conc := range []int{c, 1} {
		k := func(t, f string) string { return fmt.Sprintf("create/c%d/%s/%s", conc, t, f) }
		if r, ok := e.ratio(k(tAggregated, "rate"), k(tCRD, "rate")); ok {
			a, _ := e.res.med(k(tAggregated, "rate"))
			b, _ := e.res.med(k(tCRD, "rate"))
			rows = append(rows, targetRow{fmt.Sprintf("create rate via aggregator >= 1.0x the CRD's (%d client%s)", conc, plural(conc)),
				fmt.Sprintf("%.0f/s vs %.0f/s", a, b), fmt.Sprintf("%.2fx", r), r >= 1.0, true})
		}
		if r, ok := e.ratio(k(tAggregated, "p99"), k(tCRD, "p99")); ok {
			a, _ := e.res.med(k(tAggregated, "p99"))
			b, _ := e.res.med(k(tCRD, "p99"))
			rows = append(rows, targetRow{fmt.Sprintf("create p99 via aggregator <= the CRD's (%d client%s)", conc, plural(conc)),
				fmt.Sprintf("%s vs %s", fmtMs(a), fmtMs(b)), fmt.Sprintf("%.2fx", r), r <= 1.0, true})
		}
	}
	if r, ok := e.ratio("list/agg-proto/ms", "list/crd-json/ms"); ok {
		a, _ := e.res.med("list/agg-proto/ms")
		b, _ := e.res.med("list/crd-json/ms")
		rows = append(rows, targetRow{fmt.Sprintf("LIST %s protobuf (via aggregator) <= 0.25x the CRD's JSON latency", count(e.o.listN)),
			fmt.Sprintf("%s vs %s", fmtMs(a), fmtMs(b)), fmt.Sprintf("%.2fx", r), r <= 0.25, true})
	}
	if r, ok := e.ratio("memory/mydb/rss", "memory/kube/rss"); ok {
		a, _ := e.res.med("memory/mydb/rss")
		b, _ := e.res.med("memory/kube/rss")
		rh, _ := e.ratio("memory/mydb/heap", "memory/kube/heap")
		rows = append(rows, targetRow{fmt.Sprintf("memory growth, %s objects, mydb-apiserver <= 1.0x kube-apiserver's for as many CRs (RSS and Go heap)", count(e.o.listN)),
			fmt.Sprintf("RSS %s vs %s", fmtBytes(a), fmtBytes(b)), fmt.Sprintf("%.2fx (Go heap in use: %.2fx)", r, rh), r <= 1.0 && rh <= 1.0, true})
	}
	if a, b, ok := e.cpuPerCreate(c); ok {
		rows = append(rows, targetRow{fmt.Sprintf("CPU per create via aggregator, summed over kube-apiserver, mydb-apiserver and both etcds <= 1.0x the CRD's (%d clients)", c),
			fmt.Sprintf("%.2f ms vs %.2f ms", a, b), fmt.Sprintf("%.2fx", a/b), a <= b, true})
	}
	// The performance issue's own bars: one client's creates, and a GET.
	if r, ok := e.ratio("create/c1/"+tAggregated+"/rate", "create/c1/"+tCRD+"/rate"); ok {
		a, _ := e.res.med("create/c1/" + tAggregated + "/rate")
		b, _ := e.res.med("create/c1/" + tCRD + "/rate")
		rows = append(rows, targetRow{"create rate via aggregator >= 0.85x the CRD's (1 client)",
			fmt.Sprintf("%.0f/s vs %.0f/s", a, b), fmt.Sprintf("%.2fx", r), r >= 0.85, true})
	}
	if a, ok := e.res.med("get/" + tAggregated + "/p50"); ok {
		if c, ok := e.res.med("get/" + tCRD + "/p50"); ok {
			rows = append(rows, targetRow{"GET p50 via aggregator within 0.3 ms of the CRD's",
				fmt.Sprintf("%s vs %s", fmtMs(a), fmtMs(c)), fmt.Sprintf("%+.2f ms", a-c), a-c <= 0.3, true})
		}
	}
	if a, ok := e.res.med("get/" + tAggregated + "/p50"); ok {
		d, _ := e.res.med("get/" + tDirect + "/p50")
		rows = append(rows, targetRow{"aggregator hop on GET <= 1 ms p50 over direct",
			fmt.Sprintf("%s vs %s", fmtMs(a), fmtMs(d)), fmt.Sprintf("+%s", fmtMs(a-d)), a-d <= 1.0, true})
	}
	for _, conc := range []int{c, 1} {
		k := func(t string) string { return fmt.Sprintf("create/c%d/%s/rate", conc, t) }
		if r, ok := e.ratio(k(tAggregated), k(tEtcd)); ok {
			a, _ := e.res.med(k(tAggregated))
			b, _ := e.res.med(k(tEtcd))
			rows = append(rows, targetRow{fmt.Sprintf("create rate via aggregator / raw etcd txn rate >= 40%% (%d client%s)", conc, plural(conc)),
				fmt.Sprintf("%.0f/s vs %.0f/s", a, b), fmt.Sprintf("%.1f%%", 100*r), r >= 0.40, true})
		}
	}
	if p99, ok := e.res.med("reconcile/burst/p99"); ok {
		rows = append(rows, targetRow{fmt.Sprintf("create -> StatefulSet p99 <= 1 s, %s MyDatabases at once", count(e.o.reconcileN)),
			fmtMs(p99), fmt.Sprintf("%.1fx the target", p99/1000), p99 <= 1000, true})
	}
	for _, r := range []struct{ key, what string }{{"paced", "paced"}, {"burst", "at once"}} {
		if w, ok := e.res.med("reconcile/" + r.key + "/status-writes/mean"); ok {
			mx, _ := e.res.med("reconcile/" + r.key + "/status-writes/max")
			rows = append(rows, targetRow{fmt.Sprintf("status writes per new database, create -> Ready <= 2 (created %s)", r.what),
				fmt.Sprintf("mean %.2f, max %.0f", w, mx), fmt.Sprintf("%.2f", w), w <= 2, true})
		}
	}
	if p99, ok := e.res.med("reconcile/paced/p99"); ok {
		rows = append(rows, targetRow{fmt.Sprintf("(context) create -> StatefulSet p99 <= 1 s, %s MyDatabases at %g/s", count(e.o.reconcilePacedN), e.o.reconcileRate),
			fmtMs(p99), fmt.Sprintf("%.1fx the target", p99/1000), p99 <= 1000, true})
	}
	return rows
}

// cpuPerCreate is the CPU per create at conc clients, summed over the
// servers and etcds, of MyDatabase through the aggregator and of the CRD.
func (e *env) cpuPerCreate(conc int) (float64, float64, bool) {
	sum := func(t string) (float64, bool) {
		var total float64
		for _, proc := range []string{"kube-apiserver", "mydb-apiserver", "etcd", "mydb-etcd"} {
			v, ok := e.res.med(fmt.Sprintf("cpu/create/c%d/%s/%s", conc, t, proc))
			if !ok {
				return 0, false
			}
			total += v
		}
		return total, true
	}
	a, ok1 := sum(tAggregated)
	b, ok2 := sum(tCRD)
	return a, b, ok1 && ok2 && b > 0
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func count(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// report renders the figures as Markdown; full adds the machine, the
// command, the chart, the profiles and the notes.
func (e *env) report(full bool) string {
	var b strings.Builder
	p := func(format string, args ...interface{}) { fmt.Fprintf(&b, format, args...) }
	if full {
		p("# Benchmarks\n\n")
		p("<!-- Generated by test/bench (make bench); edit test/bench/notes.md and report.go instead. -->\n\n")
		p("mydb side by side with the same schema served as a CRD, measured in one run on one machine. ")
		p("Absolute times on a shared 2-core machine are noise; the ratios between targets of the same run are the figures. ")
		p("Every figure is the median of its repetitions.\n\n")
		p("The targets:\n\n")
		p("- **%s**: `example.com/v1` MyDatabase through kube-apiserver's aggregation layer (client-go, protobuf);\n", targetTitles[tAggregated])
		p("- **%s**: the same, straight at mydb-apiserver's port (same client certificate, delegated authn/authz);\n", targetTitles[tDirect])
		p("- **%s**: the seed's schema as a CRD in `crd.example.com`, served by kube-apiserver (dynamic client, JSON: CRDs have no protobuf);\n", targetTitles[tCRD])
		p("- **%s**: a create-if-absent transaction (`If(ModRevision(key) == 0).Then(Put)`, what an API server's create does) on mydb's etcd, with a value of the size mydb stores.\n\n", targetTitles[tEtcd])
		p("## Run\n\n")
		p("```sh\n%s\n```\n\n", e.o.command)
		if e.o.note != "" {
			p("%s\n\n", e.o.note)
		}
		p("%s\n\n", e.machine())
		p("Sizes: %d objects per create run at 1 and %d clients, %s objects for LIST and memory, %d GETs per repetition, %d watchers x %d events, "+
			"%s MyDatabases at once and %d at %g/s for create -> StatefulSet. Repetitions: %d (create, GET, watch), %d (LIST), %d (reconcile). "+
			"Objects are ~%d B of JSON as sent (fixed-size labels and annotations, the same on both kinds). Run took %s.\n\n",
			e.o.createN, e.o.concurrency, count(e.o.listN), e.o.getN, e.o.watchers, e.o.watchEvents, count(e.o.reconcileN), e.o.reconcilePacedN,
			e.o.reconcileRate, e.o.reps, e.o.listReps, e.o.reconcileReps, objectSize, e.finished.Sub(e.started).Round(time.Second))
	}
	p("## Targets\n\n| target | measured | ratio | |\n|---|---|---|---|\n")
	for _, r := range e.targets_() {
		mark := "miss"
		if r.pass {
			mark = "pass"
		}
		p("| %s | %s | %s | %s |\n", r.what, r.measured, r.ratio, mark)
	}
	p("\n")
	if full && e.o.chart != "" {
		rel, err := filepath.Rel(filepath.Dir(e.o.docs), e.o.chart)
		if err != nil {
			rel = e.o.chart
		}
		p("![advantage over the CRD](%s)\n\n", filepath.ToSlash(rel))
	}

	if e.res.n("create/c1/crd/rate") > 0 || e.res.n(fmt.Sprintf("create/c%d/crd/rate", e.o.concurrency)) > 0 {
		p("## Create\n\n%d objects per run; rate over the whole run, latency per request. CPU: milliseconds of CPU per create in each process, "+
			"from `/proc/<pid>/stat`, over the run plus the wait for mydb's controller to go idle.\n\n", e.o.createN)
		p("| clients | target | creates/s | vs CRD | p50 | p99 | CPU ms/create: kube-apiserver | mydb-apiserver | cluster etcd | mydb etcd | bench client | SARs |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, conc := range []int{1, e.o.concurrency} {
			crd, _ := e.res.med(fmt.Sprintf("create/c%d/crd/rate", conc))
			for _, t := range []string{tAggregated, tDirect, tCRD, tEtcd} {
				k := fmt.Sprintf("create/c%d/%s", conc, t)
				rate, ok := e.res.med(k + "/rate")
				if !ok {
					continue
				}
				p50, _ := e.res.med(k + "/p50")
				p99, _ := e.res.med(k + "/p99")
				cpu := func(proc string) string {
					v, ok := e.res.med("cpu/" + k + "/" + proc)
					if !ok {
						return "-"
					}
					return fmt.Sprintf("%.2f", v)
				}
				sars := "-"
				if v, ok := e.res.med("sar/" + k); ok {
					sars = fmt.Sprintf("%.0f", v)
				}
				vs := "-"
				if crd > 0 {
					vs = fmt.Sprintf("%.2fx", rate/crd)
				}
				p("| %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", conc, targetTitles[t], rate, vs, fmtMs(p50), fmtMs(p99),
					cpu("kube-apiserver"), cpu("mydb-apiserver"), cpu("etcd"), cpu("mydb-etcd"), cpu("bench"), sars)
			}
		}
		p("\nSARs: SubjectAccessReviews mydb-apiserver sent during the run (its delegated authorizer caches decisions).\n\n")
	}
	if req, ok := e.res.med("size/stored/mydb"); ok {
		cr, _ := e.res.med("size/stored/crd")
		p("Stored size of one object: mydb %s (protobuf, with defaults and managedFields; created paused, it has no status), CRD %s (JSON, with managedFields); "+
			"the raw etcd target writes %s values.\n\n", fmtBytes(req), fmtBytes(cr), fmtBytes(req))
	}
	if _, ok := e.res.med("get/crd/p50"); ok {
		p("## GET\n\n%d GETs of random objects per repetition, one client.\n\n| target | p50 | p99 |\n|---|---|---|\n", e.o.getN)
		for _, t := range []string{tAggregated, tDirect, tCRD} {
			a, _ := e.res.med("get/" + t + "/p50")
			z, _ := e.res.med("get/" + t + "/p99")
			p("| %s | %s | %s |\n", targetTitles[t], fmtMs(a), fmtMs(z))
		}
		p("\n")
	}
	if crd, ok := e.res.med("list/crd-json/ms"); ok {
		p("## LIST\n\n%s objects in a namespace; time from the request to the last byte (no gzip: the bytes are the encodings' own; "+
			"resourceVersion unset, a consistent read).\n\n| list | latency | vs CRD JSON | bytes | pages |\n|---|---|---|---|---|\n", count(e.o.listN))
		for _, k := range listOrder {
			v, ok := e.res.med("list/" + k + "/ms")
			if !ok {
				continue
			}
			by, _ := e.res.med("list/" + k + "/bytes")
			pg, _ := e.res.med("list/" + k + "/pages")
			p("| %s | %s | %.2fx | %s | %.0f |\n", listTitles[k], fmtMs(v), v/crd, fmtBytes(by), pg)
		}
		p("\n")
		if t := e.bucketTable("LIST", listColumns, listBuckets); t != "" {
			p("Profiled while one client listed them (protobuf) for %d s through the aggregator, then %d s straight at mydb. %s", e.o.profileSeconds, e.o.profileSeconds, t)
		}
	}
	if _, ok := e.res.med("watch/crd/p50"); ok {
		p("## Watch\n\n%d watchers on a namespace, %d objects created one after the other; latency from sending the create to the ADDED event "+
			"at each watcher, over all deliveries.\n\n| target | p50 | p99 | missing deliveries |\n|---|---|---|---|\n", e.o.watchers, e.o.watchEvents)
		for _, t := range []string{tAggregated, tDirect, tCRD} {
			a, _ := e.res.med("watch/" + t + "/p50")
			z, _ := e.res.med("watch/" + t + "/p99")
			m, _ := e.res.med("watch/" + t + "/missing")
			p("| %s | %s | %s | %.0f |\n", targetTitles[t], fmtMs(a), fmtMs(z), m)
		}
		p("\n")
	}
	if a, ok := e.res.med("memory/mydb/rss"); ok {
		p("## Memory\n\nGrowth while %s MyDatabases were created (straight at mydb, so kube-apiserver saw none), then %s custom resources, "+
			"after as many of each were created and deleted once to warm both servers up. "+
			"Each reading is the median of 5 samples of `/metrics` one second apart, each right after a GC forced through `/debug/pprof/heap?gc=1`: "+
			"the Go heap in use is then close to the live heap; RSS is what the process holds from the OS (Go returns freed pages lazily).\n\n", count(e.o.listN), count(e.o.listN))
		p("| | RSS | Go heap in use |\n|---|---|---|\n")
		row := func(title, key string) {
			r, _ := e.res.med(key + "/rss")
			h, _ := e.res.med(key + "/heap")
			p("| %s | %s | %s |\n", title, fmtBytes(r), fmtBytes(h))
		}
		row("mydb-apiserver before", "memory/base/mydb")
		row("kube-apiserver before", "memory/base/kube")
		row("mydb-apiserver growth for the MyDatabases", "memory/mydb")
		row("kube-apiserver growth for the custom resources", "memory/kube")
		row("(control) kube-apiserver while MyDatabases were created", "memory/kube-during-mdb")
		row("(control) mydb-apiserver while custom resources were created", "memory/mydb-during-crd")
		_ = a
		p("\n")
	}
	if _, ok := e.res.med("reconcile/burst/p99"); ok {
		p("## Create -> StatefulSet\n\nMyDatabases (replicas 1, not paused) created through the aggregator from %d clients; latency from the create request to the "+
			"StatefulSet's ADDED event on a watch. Status writes: MODIFIED events of each MyDatabase on a watch, from its create to the one that says Ready "+
			"(kwok makes the pods Ready; no instance manager answers in this scenario).\n\n"+
			"| run | p50 | p99 | max | all StatefulSets after | StatefulSets appeared at | status writes to Ready: mean | max |\n|---|---|---|---|---|---|---|---|\n", e.o.concurrency)
		for _, r := range []struct{ key, title string }{
			{"burst", fmt.Sprintf("%s at once", count(e.o.reconcileN))},
			{"paced", fmt.Sprintf("%d at %g/s", e.o.reconcilePacedN, e.o.reconcileRate)},
		} {
			p50, ok := e.res.med("reconcile/" + r.key + "/p50")
			if !ok {
				continue
			}
			p99, _ := e.res.med("reconcile/" + r.key + "/p99")
			mx, _ := e.res.med("reconcile/" + r.key + "/max")
			tot, _ := e.res.med("reconcile/" + r.key + "/total")
			rate, _ := e.res.med("reconcile/" + r.key + "/sts-rate")
			writes, wmax := "-", "-"
			if w, ok := e.res.med("reconcile/" + r.key + "/status-writes/mean"); ok {
				m, _ := e.res.med("reconcile/" + r.key + "/status-writes/max")
				writes, wmax = fmt.Sprintf("%.2f", w), fmt.Sprintf("%.0f", m)
			}
			p("| %s | %s | %s | %s | %s | %.1f/s | %s | %s |\n", r.title, fmtMs(p50), fmtMs(p99), fmtMs(mx), fmtMs(tot), rate, writes, wmax)
		}
		p("\n")
	}
	p("%s", e.scaleSection())
	p("%s", e.protocolSection())
	p("%s", e.traceSection())
	if !full {
		return b.String()
	}
	p("## Profiles\n\nTaken by the harness (`-profile-dir`, here `%s`) while %d clients created objects for %d s; `go tool pprof -top` of each.\n\n",
		e.o.profileDir, e.o.concurrency, e.o.profileSeconds)
	p("%s", e.bucketTable("create", createColumns, cpuBuckets))
	for _, pr := range []struct{ key, title string }{
		{"profile/aggregated/mydb-apiserver/top", "mydb-apiserver, creates through the aggregator (flat)"},
		{"profile/aggregated/mydb-apiserver/cum", "mydb-apiserver, creates through the aggregator (cumulative)"},
		{"profile/aggregated/kube-apiserver/top", "kube-apiserver proxying creates to mydb (flat)"},
		{"profile/aggregated/kube-apiserver/cum", "kube-apiserver proxying creates to mydb (cumulative)"},
		{"profile/crd/kube-apiserver/top", "kube-apiserver serving CRD creates (flat)"},
		{"profile/crd/kube-apiserver/cum", "kube-apiserver serving CRD creates (cumulative)"},
		{"profile/list-aggregated/kube-apiserver/cum", "kube-apiserver proxying LISTs of the population to mydb (cumulative)"},
		{"profile/list-aggregated/mydb-apiserver/cum", "mydb-apiserver serving LISTs through the aggregator (cumulative)"},
		{"profile/list-direct/mydb-apiserver/cum", "mydb-apiserver serving LISTs straight (cumulative)"},
		{"profile/heap/heap-mydb-apiserver", fmt.Sprintf("mydb-apiserver heap in use with %s MyDatabases", count(e.o.listN))},
		{"profile/reconcile/goroutines", "mydb-apiserver's controller goroutines 4 s into the create -> StatefulSet burst"},
	} {
		text, ok := e.res.notes[pr.key]
		if !ok {
			continue
		}
		p("<details><summary>%s</summary>\n\n```\n%s\n```\n\n</details>\n\n", pr.title, text)
	}
	p("%s\n", strings.TrimSpace(notes))
	return b.String()
}

func (e *env) machine() string {
	if e.savedMachine != "" {
		return e.savedMachine
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Date: %s. Machine: `nproc` = %d", e.started.UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU())
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.Index(line, ":"); i >= 0 {
					fmt.Fprintf(&b, " (%s)", strings.TrimSpace(line[i+1:]))
				}
				break
			}
		}
	}
	fmt.Fprintf(&b, ", %s, shared with other work; all components on loopback.", runtime.Version())
	if v, err := e.kube.Discovery().ServerVersion(); err == nil {
		fmt.Fprintf(&b, " kube-apiserver %s.", v.GitVersion)
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		fmt.Fprintf(&b, " Kernel %s.", strings.TrimSpace(string(out)))
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(raw)); len(f) >= 3 {
			fmt.Fprintf(&b, " Load average (1, 5, 15 min) at the end of the run: %s, %s, %s.", f[0], f[1], f[2])
		}
	}
	if out, err := exec.Command("free", "-g").Output(); err == nil {
		fmt.Fprintf(&b, "\n\n```\n$ free -g\n%s\n```", strings.TrimRight(string(out), "\n"))
	}
	return b.String()
}

// writeChart draws, for each figure, how many times better than the CRD
// mydb does (higher is better; the CRD is 1).
func (e *env) writeChart(file string) error {
	type group struct {
		label    string
		agg, dir float64
	}
	inv := func(a, b string) float64 { // CRD / ours, for costs
		r, ok := e.ratio(b, a)
		if !ok {
			return math.NaN()
		}
		return r
	}
	fwd := func(a, b string) float64 { // ours / CRD, for rates
		r, ok := e.ratio(a, b)
		if !ok {
			return math.NaN()
		}
		return r
	}
	c := e.o.concurrency
	k := func(conc int, t, f string) string { return fmt.Sprintf("create/c%d/%s/%s", conc, t, f) }
	groups := []group{
		{"creates/s\n1 client", fwd(k(1, tAggregated, "rate"), k(1, tCRD, "rate")), fwd(k(1, tDirect, "rate"), k(1, tCRD, "rate"))},
		{fmt.Sprintf("creates/s\n%d clients", c), fwd(k(c, tAggregated, "rate"), k(c, tCRD, "rate")), fwd(k(c, tDirect, "rate"), k(c, tCRD, "rate"))},
		{fmt.Sprintf("create p99\n%d clients", c), inv(k(c, tAggregated, "p99"), k(c, tCRD, "p99")), inv(k(c, tDirect, "p99"), k(c, tCRD, "p99"))},
		{"GET p50", inv("get/aggregated/p50", "get/crd/p50"), inv("get/direct/p50", "get/crd/p50")},
		{fmt.Sprintf("LIST %s\nprotobuf vs CRD JSON", count(e.o.listN)), inv("list/agg-proto/ms", "list/crd-json/ms"), inv("list/direct-proto/ms", "list/crd-json/ms")},
		{fmt.Sprintf("LIST %s\nJSON vs CRD JSON", count(e.o.listN)), inv("list/agg-json/ms", "list/crd-json/ms"), inv("list/direct-json/ms", "list/crd-json/ms")},
		{"LIST bytes\nprotobuf vs JSON", inv("list/agg-proto/bytes", "list/crd-json/bytes"), inv("list/direct-proto/bytes", "list/crd-json/bytes")},
		{"watch p50", inv("watch/aggregated/p50", "watch/crd/p50"), inv("watch/direct/p50", "watch/crd/p50")},
		{fmt.Sprintf("memory growth\n%s objects", count(e.o.listN)), inv("memory/mydb/rss", "memory/kube/rss"), inv("memory/mydb/rss", "memory/kube/rss")},
	}
	var labels []string
	var agg, dir plotter.Values
	for _, g := range groups {
		if math.IsNaN(g.agg) && math.IsNaN(g.dir) {
			continue
		}
		labels = append(labels, g.label)
		agg = append(agg, zeroNaN(g.agg))
		dir = append(dir, zeroNaN(g.dir))
	}
	if len(labels) == 0 {
		return fmt.Errorf("no figure to draw")
	}
	top := 1.0
	for i := range agg {
		top = math.Max(top, math.Max(agg[i], dir[i]))
	}
	p := plot.New()
	p.Y.Max = top * 1.3 // room for the legend
	p.Title.Text = fmt.Sprintf("mydb against the same schema as a CRD (one run, %s, %d cores)", e.started.UTC().Format("2006-01-02"), runtime.NumCPU())
	p.Y.Label.Text = "times better than the CRD (higher is better)"
	p.Y.Min = 0
	w := vg.Points(16)
	ba, err := plotter.NewBarChart(agg, w)
	if err != nil {
		return err
	}
	ba.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	ba.LineStyle.Width = 0
	ba.Offset = -w / 2
	bd, err := plotter.NewBarChart(dir, w)
	if err != nil {
		return err
	}
	bd.Color = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	bd.LineStyle.Width = 0
	bd.Offset = w / 2
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color = color.Gray{Y: 60}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(plotter.NewGrid(), ba, bd, one)
	for i, vals := range []plotter.Values{agg, dir} {
		xys := make(plotter.XYs, len(vals))
		txt := make([]string, len(vals))
		for j, v := range vals {
			xys[j] = plotter.XY{X: float64(j), Y: v}
			txt[j] = fmt.Sprintf("%.2g", v)
		}
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: txt})
		if err != nil {
			return err
		}
		for j := range l.TextStyle {
			l.TextStyle[j].XAlign = draw.XCenter
			l.TextStyle[j].Font.Size = vg.Points(7)
		}
		l.Offset = vg.Point{X: []vg.Length{-w / 2, w / 2}[i], Y: vg.Points(2)}
		p.Add(l)
	}
	p.Legend.Add(targetTitles[tAggregated], ba)
	p.Legend.Add(targetTitles[tDirect], bd)
	p.Legend.Add("CRD via kube-apiserver = 1", one)
	p.Legend.Top = true
	p.Legend.Left = false
	p.NominalX(labels...)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	return p.Save(11*vg.Inch, 5*vg.Inch, file)
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// bucketColumn is one profiled server in one profiled run.
type bucketColumn struct {
	title, run, server string
	// proxied: kube-apiserver proxied this run to mydb
	proxied bool
}

var (
	createColumns = []bucketColumn{
		{"mydb-apiserver, via aggregator", tAggregated, "mydb-apiserver", true},
		{"kube-apiserver, via aggregator", tAggregated, "kube-apiserver", true},
		{"kube-apiserver, CRD", tCRD, "kube-apiserver", false},
	}
	listColumns = []bucketColumn{
		{"kube-apiserver, via aggregator", "list-aggregated", "kube-apiserver", true},
		{"mydb-apiserver, via aggregator", "list-aggregated", "mydb-apiserver", true},
		{"mydb-apiserver, direct", "list-direct", "mydb-apiserver", false},
	}
)

// bucketTable splits each profiled server's CPU per operation (what) into
// buckets, from the profiles the harness saved.
func (e *env) bucketTable(what string, cols []bucketColumn, buckets []cpuBucket) string {
	type data struct {
		total float64
		cum   map[string]float64
		ops   float64
	}
	got := map[int]data{}
	for i, c := range cols {
		file, ok := e.res.notes[fmt.Sprintf("profile/%s/%s/file", c.run, c.server)]
		ops, ok2 := e.res.med("profile/" + c.run + "/ops")
		if !ok || !ok2 || ops == 0 {
			continue
		}
		total, cum, err := profileCum(file)
		if err != nil {
			continue
		}
		got[i] = data{total, cum, ops}
	}
	if len(got) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPU per %s, in milliseconds, by part of the work, from the CPU profiles below (a function's cumulative samples / the %ss in the profile's window; "+
		"rows nest, so they do not add up):\n\n| | ", what, what)
	for i, c := range cols {
		if _, ok := got[i]; ok {
			fmt.Fprintf(&b, "%s | ", c.title)
		}
	}
	fmt.Fprintf(&b, "\n|---|")
	for i := range cols {
		if _, ok := got[i]; ok {
			fmt.Fprintf(&b, "---|")
		}
	}
	fmt.Fprintf(&b, "\n| **whole process** | ")
	for i := range cols {
		if d, ok := got[i]; ok {
			fmt.Fprintf(&b, "**%.2f** | ", 1000*d.total/d.ops)
		}
	}
	fmt.Fprintf(&b, "\n")
	for _, bk := range buckets {
		var cells []string
		for i, c := range cols {
			d, ok := got[i]
			if !ok {
				continue
			}
			if bk.aggregatedOnly && !c.proxied {
				cells = append(cells, "-")
				continue
			}
			// A part with no samples cost less than the profile can see
			// (its functions exist: checkProfiledFunctions): 0, not left out.
			var v float64
			for _, f := range bk.funcs {
				v += d.cum[f]
			}
			cells = append(cells, fmt.Sprintf("%.2f", 1000*v/d.ops))
		}
		fmt.Fprintf(&b, "| %s | %s |\n", bk.title, strings.Join(cells, " | "))
	}
	b.WriteString("\n")
	return b.String()
}

// The scale section is delimited so a run of the scale scenario alone can
// replace it in the docs without the others' figures (replaceScaleSection).
const (
	scaleBegin = "<!-- scale: written by the scale scenario -->"
	scaleEnd   = "<!-- /scale -->"
)

// scaleSection is the scale scenario's table ("" when it did not run).
func (e *env) scaleSection() string {
	if _, ok := e.res.med("scale/" + scaleModes[0].key + "/status-rps"); !ok {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...interface{}) { fmt.Fprintf(&b, format, args...) }
	p("%s\n## One controller at scale\n\n", scaleBegin)
	p("%s MyDatabases of 3 instances (PostgreSQL, idle) led by one mydb-apiserver, every instance manager played by the harness (`test/bench/managers.go`): "+
		"one listener per pod IP that kwok gives, mutual TLS with a certificate the database's issuer signs for the pod, GET /v1/status and "+
		"the health stream as a real manager answers them. The same databases in each mode, one after the other, the server restarted with the mode's flags; "+
		"each measured for %s after they were all Ready again, the controller's queue had emptied and 70 s more. CPU: share of one core from `/proc/<pid>/stat`; "+
		"requests to kube-apiserver: mydb-apiserver's `rest_client_requests_total` for its host; memory after a forced GC.\n\n",
		count(e.o.scaleN), e.o.scaleWindow)
	p("| | ")
	for _, m := range scaleModes {
		p("%s | ", m.title)
	}
	p("ratio |\n|---|")
	for range scaleModes {
		p("---|")
	}
	p("---|\n")
	row := func(title, key string, format func(float64) string) {
		p("| %s | ", title)
		var vals []float64
		for _, m := range scaleModes {
			v, ok := e.res.med("scale/" + m.key + "/" + key)
			if !ok {
				p("- | ")
				vals = append(vals, 0)
				continue
			}
			vals = append(vals, v)
			p("%s | ", format(v))
		}
		if len(vals) == 2 && vals[0] > 0 {
			p("%.2fx |\n", vals[1]/vals[0])
		} else {
			p("- |\n")
		}
	}
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	rate := func(v float64) string { return fmt.Sprintf("%.1f/s", v) }
	row("mydb-apiserver CPU (the controller runs in it)", "cpu/mydb-apiserver", pct)
	row("kube-apiserver CPU", "cpu/kube-apiserver", pct)
	row("mydb etcd CPU", "cpu/mydb-etcd", pct)
	row("mydb-apiserver RSS", "rss", fmtBytes)
	row("mydb-apiserver Go heap in use", "heap", fmtBytes)
	row("requests to kube-apiserver", "kube-rps", rate)
	row("reconciles", "reconciles-per-s", rate)
	row("GET /v1/status to the managers", "status-rps", rate)
	row("health lines from the managers", "lines-per-s", rate)
	row("other requests to the managers", "other-rps", rate)
	row("health streams open", "streams", func(v float64) string { return fmt.Sprintf("%.0f", v) })
	row("databases Ready at the end", "ready", func(v float64) string { return fmt.Sprintf("%.0f", v) })
	p("\nThe controller reads its children from informers, so its requests to kube-apiserver are the same in both modes (its Lease, Events); "+
		"kube-apiserver's CPU is mostly what it serves the other components (kwok's %d pods, the controller manager). A database is read "+
		"every poll interval (10 s) while polling, every resync (1 m) with the streams, whose lines (2 a second per instance) cost the "+
		"controller less than the polls and reconciles they replace. The harness's own CPU (the managers it plays) is left out.\n", 3*e.o.scaleN)
	if v, ok := e.res.med("scale/ready-after"); ok {
		p("\nAll %s databases were Ready %s after the first create.", count(e.o.scaleN), (time.Duration(v) * time.Second).Round(time.Second))
	}
	if f, ok := e.res.notes["scale/failures"]; ok {
		p(" The simulated managers failed %s.", f)
	}
	p("\n%s\n\n", scaleEnd)
	return b.String()
}

// section is a part of the docs one scenario writes, delimited so that a
// run of that scenario alone replaces it and leaves the rest.
type section struct {
	begin, end string
	text       func() string
}

func (e *env) sections() map[string]section {
	return map[string]section{
		"scale":    {scaleBegin, scaleEnd, e.scaleSection},
		"protocol": {protocolBegin, protocolEnd, e.protocolSection},
		"trace":    {traceBegin, traceEnd, e.traceSection},
	}
}

// replaceSection writes a delimited section (the scale or the trace
// scenario's) into the docs file in place of the one it holds (before the
// profiles when it holds none), leaving the other figures as they are.
func replaceSection(file, begin, end, section string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc := string(raw)
	if i, j := strings.Index(doc, begin), strings.Index(doc, end); i >= 0 && j > i {
		rest := strings.TrimLeft(doc[j+len(end):], "\n")
		doc = doc[:i] + section + rest
	} else if i := strings.Index(doc, "## Profiles"); i >= 0 {
		doc = doc[:i] + section + doc[i:]
	} else {
		doc += "\n" + section
	}
	return os.WriteFile(file, []byte(doc), 0o644)
}
