// Command bench measures mydb side by side with the same schema served as a
// CRD, in one run on one machine, and reports the figures as ratios.
//
// It needs the local control plane (make local-up) and talks to four
// targets: MyDatabase through kube-apiserver's aggregation layer,
// MyDatabase straight at mydb-apiserver's port, the seed's schema as a CRD
// in crd.example.com served by kube-apiserver, and mydb's etcd itself (a
// create-if-absent transaction, the floor under any API server's write).
//
// It is a Go module of its own (so that gonum/plot, for the chart, is not a
// dependency of the server), built into _output/bin/mydb-bench by make
// bench-build and run from the repository's root, where its default paths are:
//
//	make bench-build
//	_output/bin/mydb-bench                           # the small default, a few minutes
//	_output/bin/mydb-bench -large                    # the sizes: 10k objects, 100 watchers, 1000 reconciles
//	_output/bin/mydb-bench -scenarios create,list    # some scenarios only
//	_output/bin/mydb-bench -docs docs/benchmarks.md -chart docs/benchmarks.png
//
// make bench does the last, after make local-up. Every scenario works in
// namespaces of its own and deletes them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type options struct {
	kubeconfig     string
	localDir       string
	mydbURL        string
	mydbEtcdURL    string
	clusterEtcdURL string

	large       bool
	scenarios   string
	reps        int
	listReps    int
	concurrency int

	createN         int
	listN           int
	getN            int
	watchers        int
	watchEvents     int
	reconcileN      int
	reconcilePacedN int
	reconcileRate   float64
	reconcileReps   int
	scaleN          int
	scaleWindow     time.Duration
	traceN          int

	profileDir     string
	profileSeconds int
	docs           string
	chart          string
	note           string
	resultsFile    string
	render         string
	timeout        time.Duration
	command        string
}

// sizes are a mode's defaults; a flag set to a non-zero value wins.
type sizes struct {
	createN, listN, getN, watchers, watchEvents, reconcileN, reconcilePacedN, reconcileReps, scaleN int
}

var (
	smallSizes = sizes{createN: 500, listN: 2000, getN: 300, watchers: 20, watchEvents: 100, reconcileN: 200, reconcilePacedN: 100, reconcileReps: 3, scaleN: 100}
	largeSizes = sizes{createN: 2000, listN: 10000, getN: 1000, watchers: 100, watchEvents: 200, reconcileN: 1000, reconcilePacedN: 300, reconcileReps: 2, scaleN: 1000}
)

var allScenarios = []string{"sizes", "population", "create", "profile", "watch", "reconcile", "scale", "protocol", "trace"}

func main() {
	o := &options{}
	flag.StringVar(&o.localDir, "local-dir", filepath.Join("_output", "local"), "hack/local-up.sh's LOCAL_DIR: its env file gives the defaults of the next four flags, its PID files the processes to account CPU to")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig of the cluster mydb is aggregated into (default <local-dir>/kubeconfig)")
	flag.StringVar(&o.mydbURL, "mydb-url", "", "mydb-apiserver's own address, the direct target (default https://127.0.0.1:$MYDB_PORT)")
	flag.StringVar(&o.mydbEtcdURL, "mydb-etcd", "", "mydb's etcd, the raw etcd target (default http://127.0.0.1:$MYDB_ETCD_PORT)")
	flag.StringVar(&o.clusterEtcdURL, "cluster-etcd", "", "the cluster's etcd, to read what the CRD stores (default http://127.0.0.1:$ETCD_PORT)")
	flag.StringVar(&o.note, "note", "", "a sentence about the run for the report (what was measured, what else ran)")
	flag.BoolVar(&o.large, "large", false, "the issue's sizes: 10k objects for LIST and memory, 100 watchers, 1000 reconciles")
	flag.StringVar(&o.scenarios, "scenarios", strings.Join(allScenarios, ","), "scenarios to run, in this order: "+strings.Join(allScenarios, ","))
	flag.IntVar(&o.reps, "reps", 3, "repetitions of the create, GET and watch figures (the report quotes the median)")
	flag.IntVar(&o.listReps, "list-reps", 5, "repetitions of each LIST")
	flag.IntVar(&o.concurrency, "concurrency", 16, "clients of the concurrent create figures")
	flag.IntVar(&o.createN, "create-n", 0, "objects per create run (default 500, -large 2000)")
	flag.IntVar(&o.listN, "list-n", 0, "objects listed, and counted for memory growth (default 2000, -large 10000)")
	flag.IntVar(&o.getN, "get-n", 0, "GETs per repetition (default 300, -large 1000)")
	flag.IntVar(&o.watchers, "watchers", 0, "watchers (default 20, -large 100)")
	flag.IntVar(&o.watchEvents, "watch-events", 0, "objects created while watched (default 100, -large 200)")
	flag.IntVar(&o.reconcileN, "n", 0, "alias of -reconcile-n")
	flag.IntVar(&o.reconcileN, "reconcile-n", 0, "MyDatabases created at once for create -> StatefulSet (default 200, -large 1000)")
	flag.IntVar(&o.reconcilePacedN, "reconcile-paced-n", 0, "MyDatabases created at -reconcile-rate (default 100, -large 300; -1 skips)")
	flag.Float64Var(&o.reconcileRate, "reconcile-rate", 10, "creates per second of the paced reconcile run")
	flag.IntVar(&o.reconcileReps, "reconcile-reps", 0, "repetitions of the reconcile runs (default 3, -large 2)")
	flag.IntVar(&o.scaleN, "scale-n", 0, "MyDatabases of 3 instances one controller leads in the scale scenario, answered by simulated managers (default 100, -large 1000)")
	flag.IntVar(&o.traceN, "trace-n", 200, "traced creates and GETs per target in the trace scenario")
	flag.DurationVar(&o.scaleWindow, "scale-window", 2*time.Minute, "how long the scale scenario measures each mode of the controller")
	flag.StringVar(&o.profileDir, "profile-dir", filepath.Join("_output", "bench"), "where CPU, heap and goroutine profiles go (empty: none)")
	flag.IntVar(&o.profileSeconds, "profile-seconds", 10, "length of the CPU profiles")
	flag.StringVar(&o.docs, "docs", "", "write the report as Markdown to this file (docs/benchmarks.md)")
	flag.StringVar(&o.chart, "chart", "", "write the chart as PNG to this file (docs/benchmarks.png); its name is linked from -docs")
	flag.DurationVar(&o.timeout, "timeout", 90*time.Minute, "give up after this long")
	flag.StringVar(&o.resultsFile, "results", filepath.Join("_output", "bench", "results.json"), "save every sample of the run here (empty: do not)")
	flag.StringVar(&o.render, "render", "", "run nothing: render -docs and -chart again from saved -results files (comma-separated; a later file replaces the figures it has)")
	flag.Parse()
	if o.render != "" {
		if err := render(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	o.command = "_output/bin/mydb-bench " + strings.Join(os.Args[1:], " ")
	if c := os.Getenv("BENCH_COMMAND"); c != "" {
		o.command = c
	}

	local := readEnvFile(filepath.Join(o.localDir, "env"))
	get := func(name, def string) string {
		if v := local[name]; v != "" {
			return v
		}
		return def
	}
	if o.kubeconfig == "" {
		o.kubeconfig = filepath.Join(o.localDir, "kubeconfig")
	}
	if o.mydbURL == "" {
		o.mydbURL = "https://127.0.0.1:" + get("MYDB_PORT", "21444")
	}
	if o.mydbEtcdURL == "" {
		o.mydbEtcdURL = "http://127.0.0.1:" + get("MYDB_ETCD_PORT", "21381")
	}
	if o.clusterEtcdURL == "" {
		o.clusterEtcdURL = "http://127.0.0.1:" + get("ETCD_PORT", "21379")
	}

	sz := smallSizes
	if o.large {
		sz = largeSizes
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.createN, sz.createN)
	def(&o.listN, sz.listN)
	def(&o.getN, sz.getN)
	def(&o.watchers, sz.watchers)
	def(&o.watchEvents, sz.watchEvents)
	def(&o.reconcileN, sz.reconcileN)
	def(&o.reconcilePacedN, sz.reconcilePacedN)
	def(&o.reconcileReps, sz.reconcileReps)
	def(&o.scaleN, sz.scaleN)

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// readEnvFile reads the "export NAME=value" lines hack/local-up.sh writes.
func readEnvFile(file string) map[string]string {
	out := map[string]string{}
	raw, err := os.ReadFile(file)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = strings.Trim(v, `"'`)
		}
	}
	return out
}

func run(ctx context.Context, o *options) error {
	e, err := newEnv(ctx, o)
	if err != nil {
		return err
	}
	if err := e.checkProfiledFunctions(); err != nil {
		return err
	}
	defer func() {
		e.deleteNamespaces(context.Background(), 5*time.Minute)
		e.deleteCRD(context.Background())
	}()
	e.started = time.Now()
	wanted := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		wanted[strings.TrimSpace(s)] = true
	}
	// The raw etcd target needs mydb's stored size, so sizes always runs
	// when create does.
	if wanted["create"] {
		wanted["sizes"] = true
	}
	steps := map[string]func(context.Context) error{
		"sizes":      e.measureStoredSizes,
		"population": e.scenarioPopulation,
		"create":     e.scenarioCreate,
		"profile":    e.scenarioProfile,
		"watch":      e.scenarioWatch,
		"reconcile":  e.scenarioReconcile,
		"scale":      e.scenarioScale,
		"protocol":   e.scenarioProtocol,
		"trace":      e.scenarioTrace,
	}
	for _, s := range allScenarios {
		if !wanted[s] {
			continue
		}
		if s == "profile" && o.profileDir == "" {
			continue
		}
		t0 := time.Now()
		e.logf("== %s", s)
		if err := steps[s](ctx); err != nil {
			if err2 := e.checkStable(); err2 != nil {
				err = err2
			}
			return fmt.Errorf("%s: %w", s, err)
		}
		e.deleteNamespaces(ctx, 10*time.Minute)
		if err := e.checkStable(); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		e.logf("== %s done in %s", s, time.Since(t0).Round(time.Second))
	}
	e.finished = time.Now()
	if o.resultsFile != "" {
		if err := e.save(o.resultsFile); err != nil {
			return err
		}
	}
	return e.output()
}

// output prints the tables and writes the chart and the docs.
func (e *env) output() error {
	o := e.o
	fmt.Println()
	fmt.Print(e.report(false))
	if _, alone := e.sections()[strings.TrimSpace(o.scenarios)]; o.chart != "" && !alone {
		if err := e.writeChart(o.chart); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		e.logf("wrote %s", o.chart)
	}
	if o.docs != "" {
		// A scenario with a section of its own, alone: its section, the rest as it was.
		if sec, ok := e.sections()[strings.TrimSpace(o.scenarios)]; ok {
			if err := replaceSection(o.docs, sec.begin, sec.end, sec.text()); err != nil {
				return err
			}
		} else if err := os.WriteFile(o.docs, []byte(e.report(true)), 0o644); err != nil {
			return err
		}
		e.logf("wrote %s", o.docs)
	}
	return nil
}

func (e *env) logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// saved is a run's samples and the flags that made it.
type saved struct {
	Flags    map[string]string
	Samples  map[string][]float64
	Notes    map[string]string
	Started  time.Time
	Finished time.Time
	Command  string
	Machine  string
}

func (e *env) save(file string) error {
	s := saved{Flags: map[string]string{}, Samples: e.res.samples, Notes: e.res.notes,
		Started: e.started, Finished: e.finished, Command: e.o.command, Machine: e.machine()}
	flag.VisitAll(func(f *flag.Flag) {
		if f.Name != "render" && f.Name != "docs" && f.Name != "chart" {
			s.Flags[f.Name] = f.Value.String()
		}
	})
	raw, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, raw, 0o644)
}

// render writes the report of a saved run with this build's notes.
func render(o *options) error {
	var s saved
	for i, file := range strings.Split(o.render, ",") {
		raw, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var part saved
		if err := json.Unmarshal(raw, &part); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if i == 0 {
			s = part
			continue
		}
		// a later run replaces what it measured again (a profile, say)
		for k, v := range part.Samples {
			s.Samples[k] = v
		}
		for k, v := range part.Notes {
			s.Notes[k] = v
		}
	}
	docs, chart := o.docs, o.chart
	for name, v := range s.Flags {
		if err := flag.Set(name, v); err != nil {
			return fmt.Errorf("flag -%s=%s: %w", name, v, err)
		}
	}
	o.docs, o.chart, o.command = docs, chart, s.Command
	e := &env{o: o, res: &results{samples: s.Samples, notes: s.Notes}, started: s.Started, finished: s.Finished, savedMachine: s.Machine}
	return e.output()
}
