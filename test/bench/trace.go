package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The trace scenario asks the API servers where the time of one request
// goes, from their own OpenTelemetry spans: the rig runs Jaeger and gives
// kube-apiserver and mydb-apiserver a tracing configuration
// (MYDB_TRACING=1 hack/local-up.sh) whose sampling rate is 0, and the
// harness sends a sampled W3C traceparent with each request it wants traced
// (the servers trust it from system:masters). kube-apiserver's aggregator
// passes the trace on to mydb-apiserver, so one trace holds both servers'
// filters, the proxy, the handler's steps and the etcd calls.

// traceWarmup requests per target and verb before the traced ones, so that
// connections, caches (the delegated authorizer's) and the Go runtime are
// warm as in the create and GET figures.
const traceWarmup = 50

// traced is one traced request: its trace, the client's span that the
// servers' spans hang from, and the client's own clock around the call.
type traced struct {
	traceID, spanID string
	sent, received  time.Time
}

type traceContextKey struct{}

// traceparentTransport sends the traceparent header of the request's
// context, if it has one.
type traceparentTransport struct{ rt http.RoundTripper }

func (t traceparentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tr, ok := r.Context().Value(traceContextKey{}).(*traced); ok {
		r = r.Clone(r.Context())
		r.Header.Set("traceparent", "00-"+tr.traceID+"-"+tr.spanID+"-01")
	}
	return t.rt.RoundTrip(r)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// traceVerbs and traceTargets are what the scenario traces, in this order.
var (
	traceVerbs   = []string{"create", "get"}
	traceTargets = []string{tAggregated, tCRD, tDirect}
)

func (e *env) scenarioTrace(ctx context.Context) error {
	restore, err := e.tracingOn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := restore(); err != nil {
			e.logf("trace: %v", err)
		}
	}()
	queryURL := "http://127.0.0.1:" + readEnvFile(filepath.Join(e.o.localDir, "env"))["JAEGER_QUERY_PORT"]

	cfg := rest.CopyConfig(e.kubeCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return traceparentTransport{rt} })
	direct := rest.CopyConfig(cfg)
	direct.Host = e.o.mydbURL
	aggDB, err := clientset.NewForConfig(protobuf(cfg))
	if err != nil {
		return err
	}
	directDB, err := clientset.NewForConfig(protobuf(direct))
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	targets := map[string]target{
		tAggregated: &mdbTarget{label: tAggregated, c: aggDB, p: e.payload},
		tDirect:     &mdbTarget{label: tDirect, c: directDB, p: e.payload},
		tCRD:        &crdTarget{c: dyn, p: e.payload},
	}

	n := e.o.traceN
	requests := map[string][]*traced{}
	for _, tn := range traceTargets {
		t := targets[tn]
		ns, err := e.namespace(ctx, "trace-"+tn)
		if err != nil {
			return err
		}
		for i := 0; i < traceWarmup; i++ {
			if err := t.create(ctx, ns, fmt.Sprintf("warm-%05d", i)); err != nil {
				return fmt.Errorf("trace %s: %w", tn, err)
			}
		}
		for i := 0; i < n; i++ {
			tr := &traced{traceID: randomHex(16), spanID: randomHex(8)}
			tr.sent = time.Now()
			if err := t.create(context.WithValue(ctx, traceContextKey{}, tr), ns, fmt.Sprintf("traced-%05d", i)); err != nil {
				return fmt.Errorf("trace %s: %w", tn, err)
			}
			tr.received = time.Now()
			requests["create/"+tn] = append(requests["create/"+tn], tr)
		}
		for i := 0; i < traceWarmup; i++ {
			if err := t.get(ctx, ns, "warm-00000"); err != nil {
				return fmt.Errorf("trace %s: %w", tn, err)
			}
		}
		for i := 0; i < n; i++ {
			tr := &traced{traceID: randomHex(16), spanID: randomHex(8)}
			tr.sent = time.Now()
			if err := t.get(context.WithValue(ctx, traceContextKey{}, tr), ns, fmt.Sprintf("warm-%05d", i%traceWarmup)); err != nil {
				return fmt.Errorf("trace %s: %w", tn, err)
			}
			tr.received = time.Now()
			requests["get/"+tn] = append(requests["get/"+tn], tr)
		}
		e.logf("trace %-10s: %d creates and %d GETs traced", tn, n, n)
	}

	// The servers export in batches every 5 s.
	time.Sleep(6 * time.Second)
	for _, verb := range traceVerbs {
		for _, tn := range traceTargets {
			missing := 0
			for _, tr := range requests[verb+"/"+tn] {
				spans, err := fetchTrace(ctx, queryURL, tr.traceID, tn)
				if err != nil {
					missing++
					continue
				}
				stages, err := traceStages(verb, tn, tr, spans)
				if err != nil {
					missing++
					if missing == 1 {
						e.logf("trace %s %s: %v", verb, tn, err)
					}
					continue
				}
				for _, s := range stages {
					e.res.add(fmt.Sprintf("trace/%s/%s/%s", verb, tn, s.key), s.ms)
				}
			}
			if missing > 0 {
				e.res.note(fmt.Sprintf("trace/%s/%s/incomplete", verb, tn), strconv.Itoa(missing))
			}
			e.logf("trace %s %-10s: %d of %d traces complete", verb, tn, len(requests[verb+"/"+tn])-missing, len(requests[verb+"/"+tn]))
		}
	}
	return nil
}

// tracingOn brings the rig up with tracing if it runs without, and returns
// what puts it back as it was.
func (e *env) tracingOn(ctx context.Context) (func() error, error) {
	if readEnvFile(filepath.Join(e.o.localDir, "env"))["MYDB_TRACING"] == "1" {
		return func() error { return nil }, nil
	}
	e.logf("trace: restarting kube-apiserver and mydb-apiserver with tracing (MYDB_TRACING=1 hack/local-up.sh)")
	if err := e.localUp(ctx, "MYDB_TRACING=1"); err != nil {
		return nil, err
	}
	return func() error {
		e.logf("trace: restarting kube-apiserver and mydb-apiserver without tracing")
		return e.localUp(context.Background(), "MYDB_TRACING=0")
	}, nil
}

// localUp runs hack/local-up.sh on the rig's LOCAL_DIR with its node, its
// tracing and env, and follows the PIDs of what it restarted.
func (e *env) localUp(ctx context.Context, env ...string) error {
	local := readEnvFile(filepath.Join(e.o.localDir, "env"))
	cmd := exec.CommandContext(ctx, "hack/local-up.sh")
	cmd.Env = append(os.Environ(), "LOCAL_DIR="+e.o.localDir, "MYDB_NODE="+local["MYDB_NODE"], "MYDB_TRACING="+local["MYDB_TRACING"])
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/local-up.sh: %w\n%s", err, out)
	}
	for name := range e.pids {
		if name == "bench" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(e.o.localDir, "pids", name+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			e.pids[name] = pid
		}
	}
	// kube-apiserver may have restarted: the CRD's and the aggregated
	// group's discovery come back a moment after /readyz.
	return e.installCRD(ctx)
}

// span is one span of a trace as Jaeger returns it (OTLP JSON).
type span struct {
	id, parent, name string
	kind             int // 1 internal, 2 server, 3 client
	start, end       int64
	events           map[string]int64 // first occurrence of each event
}

type otlpTrace struct {
	Result struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					SpanID            string `json:"spanId"`
					ParentSpanID      string `json:"parentSpanId"`
					Name              string `json:"name"`
					Kind              int    `json:"kind"`
					StartTimeUnixNano string `json:"startTimeUnixNano"`
					EndTimeUnixNano   string `json:"endTimeUnixNano"`
					Events            []struct {
						TimeUnixNano string `json:"timeUnixNano"`
						Name         string `json:"name"`
					} `json:"events"`
				} `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	} `json:"result"`
}

// fetchTrace reads a trace from Jaeger's query API, waiting a little for
// the last batch of its spans. A complete trace holds the handler's span
// ("Create" or "Get") and, through the aggregator, two server spans.
func fetchTrace(ctx context.Context, queryURL, traceID, target string) (map[string]*span, error) {
	var last error
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, queryURL+"/api/v3/traces/"+traceID, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("jaeger: %s: %s", resp.Status, raw)
			continue
		}
		var t otlpTrace
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, err
		}
		spans := map[string]*span{}
		servers := 0
		for _, rs := range t.Result.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := &span{id: s.SpanID, parent: s.ParentSpanID, name: s.Name, kind: s.Kind, events: map[string]int64{}}
					sp.start, _ = strconv.ParseInt(s.StartTimeUnixNano, 10, 64)
					sp.end, _ = strconv.ParseInt(s.EndTimeUnixNano, 10, 64)
					for _, ev := range s.Events {
						at, _ := strconv.ParseInt(ev.TimeUnixNano, 10, 64)
						if _, seen := sp.events[ev.Name]; !seen {
							sp.events[ev.Name] = at
						}
					}
					spans[sp.id] = sp
					if sp.kind == 2 {
						servers++
					}
				}
			}
		}
		want := 1
		if target == tAggregated {
			want = 2
		}
		if servers >= want {
			return spans, nil
		}
		last = fmt.Errorf("trace %s has %d of %d server spans", traceID, servers, want)
	}
	return nil, last
}

// stage is the time between two points of one traced request.
type stage struct {
	key string
	ms  float64
}

// A row of the trace table: a stage of a request, and where it begins and
// ends in the servers' spans ("<span>" its start, "<span>." its end,
// "<span>:<event>" an event). The spans: kube and mydb (each server's
// request, from its received timestamp), their filters ("kube audit", ...),
// proxy (the aggregator's request to mydb), handler ("Create"/"Get" in the
// server that serves the resource), storage ("Create etcd3"/"Get etcd3"),
// front (the server the client talks to), client (the harness's clock).
type traceRow struct {
	key, title string
	from, to   string
}

var traceRows = map[string][]traceRow{
	"create": append(append(traceFrontRows(), []traceRow{
		{"decode", "read the body, decode (protobuf or JSON) and convert", "handler", "handler:Conversion done"},
		{"before-store", "audit of the request object, object checks", "handler:Conversion done", "handler:About to store object in database"},
		{"admission", "managed fields, admission, the strategy (defaults, validation)", "handler:About to store object in database", "storage"},
		{"encode", "encode for storage", "storage", "storage:TransformToStorage succeeded"},
		{"etcd", "etcd: the Txn, a client round trip", "storage:TransformToStorage succeeded", "storage:Txn call succeeded"},
		{"after-store", "decode what was stored, the registry's after-create", "storage:Txn call succeeded", "handler:Write to database call succeeded"},
		{"response", "encode and write the response", "handler:Write to database call succeeded", "handler:Writing http response done"},
	}...), traceBackRows()...),
	"get": append(append(traceFrontRows(), []traceRow{
		{"before-get", "request options, to the registry", "handler", "handler:About to Get from storage"},
		{"etcd", "etcd: the Range, a client round trip", "storage", "storage:Get call succeeded"},
		{"decode", "decode what was stored", "storage:Get call succeeded", "storage:Decode succeeded"},
		{"after-get", "the registry's decorations, to the handler", "storage:Decode succeeded", "handler:About to write a response"},
		{"response", "encode and write the response", "handler:About to write a response", "handler:Writing http response done"},
	}...), traceBackRows()...),
}

func traceFrontRows() []traceRow {
	return []traceRow{
		{"to-server", "client to the first server: the request on the wire, TLS, HTTP/2", "client", "front"},
		{"kube-authn", "kube-apiserver: authentication (client certificate), request info", "kube", "kube audit"},
		{"kube-filters", "kube-apiserver: audit, impersonation, priority and fairness", "kube audit", "kube authorization"},
		{"kube-authz", "kube-apiserver: authorization (RBAC), routing to the handler or the aggregator's proxy", "kube authorization", "next"},
		{"proxy", "aggregator to mydb-apiserver: the proxied request on the wire (a pooled HTTP/2 connection)", "proxy", "mydb"},
		{"mydb-authn", "mydb-apiserver: authentication (the front proxy's headers, or a client certificate)", "mydb", "mydb audit"},
		{"mydb-filters", "mydb-apiserver: audit, impersonation, priority and fairness", "mydb audit", "mydb authorization"},
		{"mydb-authz", "mydb-apiserver: authorization (delegated, cached), routing to the handler", "mydb authorization", "handler"},
	}
}

func traceBackRows() []traceRow {
	return []traceRow{
		{"unwind", "the handler's end to its server's: the filters unwinding", "handler:Writing http response done", "back."},
		{"proxy-back", "mydb-apiserver's end to kube-apiserver's: the response through the proxy", "mydb.", "kube."},
		{"to-client", "the first server's end to the client: the response on the wire, decoding", "front.", "client."},
	}
}

// traceStages finds the rows' points in one request's spans.
func traceStages(verb, tn string, tr *traced, spans map[string]*span) ([]stage, error) {
	children := map[string][]*span{}
	for _, s := range spans {
		children[s.parent] = append(children[s.parent], s)
	}
	for _, kids := range children {
		sort.Slice(kids, func(i, j int) bool { return kids[i].start < kids[j].start })
	}
	var front *span
	for _, s := range children[tr.spanID] {
		if s.kind == 2 {
			front = s
		}
	}
	if front == nil {
		return nil, fmt.Errorf("no server span under the client's")
	}
	// descendant finds the first span under root (depth first, by start)
	// that matches.
	var descendant func(root *span, match func(*span) bool) *span
	descendant = func(root *span, match func(*span) bool) *span {
		for _, k := range children[root.id] {
			if match(k) {
				return k
			}
			if d := descendant(k, match); d != nil {
				return d
			}
		}
		return nil
	}
	named := func(name string) func(*span) bool { return func(s *span) bool { return s.name == name } }
	roles := map[string]*span{"front": front}
	switch tn {
	case tAggregated:
		roles["kube"] = front
		roles["proxy"] = descendant(front, func(s *span) bool { return s.kind == 3 && strings.HasPrefix(s.name, "HTTP ") })
		if roles["proxy"] == nil {
			return nil, fmt.Errorf("no proxy span")
		}
		roles["mydb"] = descendant(roles["proxy"], func(s *span) bool { return s.kind == 2 })
		roles["back"] = roles["mydb"]
	case tCRD:
		roles["kube"] = front
		roles["back"] = front
	case tDirect:
		roles["mydb"] = front
		roles["back"] = front
	}
	handlerName := map[string]string{"create": "Create", "get": "Get"}[verb]
	for _, server := range []string{"kube", "mydb"} {
		s := roles[server]
		if s == nil {
			continue
		}
		for _, f := range []string{"audit", "authorization"} {
			// the server's own filters: not below a proxy span
			roles[server+" "+f] = descendant(s, func(x *span) bool { return x.name == f })
		}
	}
	if roles["back"] == nil {
		return nil, fmt.Errorf("no server span behind the proxy")
	}
	roles["handler"] = descendant(roles["back"], named(handlerName))
	if roles["handler"] == nil {
		return nil, fmt.Errorf("no %s span", handlerName)
	}
	roles["storage"] = descendant(roles["handler"], named(handlerName+" etcd3"))
	if tn == tAggregated {
		roles["next"] = roles["proxy"]
	} else {
		roles["next"] = roles["handler"]
	}

	point := func(ref string) (int64, bool) {
		switch ref {
		case "client":
			return tr.sent.UnixNano(), true
		case "client.":
			return tr.received.UnixNano(), true
		}
		name, event, hasEvent := strings.Cut(ref, ":")
		end := strings.HasSuffix(name, ".")
		s := roles[strings.TrimSuffix(name, ".")]
		if s == nil {
			return 0, false
		}
		switch {
		case hasEvent:
			at, ok := s.events[event]
			return at, ok
		case end:
			return s.end, true
		default:
			return s.start, true
		}
	}
	var out []stage
	for _, r := range traceRows[verb] {
		from, ok1 := point(r.from)
		to, ok2 := point(r.to)
		if ok1 && ok2 {
			out = append(out, stage{r.key, float64(to-from) / 1e6})
		}
	}
	out = append(out, stage{"total", float64(tr.received.Sub(tr.sent)) / 1e6})
	return out, nil
}

// The trace section is delimited like the scale one, so a run of the trace
// scenario alone replaces only it (replaceSection).
const (
	traceBegin = "<!-- trace: written by the trace scenario -->"
	traceEnd   = "<!-- /trace -->"
)

// traceSection is the trace scenario's tables ("" when it did not run).
func (e *env) traceSection() string {
	if e.res.n("trace/create/"+tAggregated+"/total") == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...interface{}) { fmt.Fprintf(&b, format, args...) }
	p("%s\n## Where the time of one request goes (traced)\n\n", traceBegin)
	p("The servers' own OpenTelemetry spans (kube-apiserver's and mydb-apiserver's tracing configuration, spans to Jaeger on the machine: "+
		"`MYDB_TRACING=1 hack/local-up.sh`; the scenario turns it on and off again). One client, one request at a time, %d traced creates "+
		"and %d traced GETs per target after %d untraced ones; each cell the median over the requests of the time between two points of a "+
		"request's trace, in milliseconds. The aggregator passes the trace on to mydb-apiserver, so one trace holds both servers. "+
		"Tracing itself costs time (a span per filter and step), so the totals are above the untraced figures above; the stages are "+
		"what to compare.\n\n", e.o.traceN, e.o.traceN, traceWarmup)
	for _, verb := range traceVerbs {
		title := map[string]string{"create": "Create (POST, protobuf, 1 KiB)", "get": "GET (protobuf)"}[verb]
		p("**%s**\n\n| stage | %s | %s | %s |\n|---|---|---|---|\n", title,
			targetTitles[tAggregated], targetTitles[tCRD], targetTitles[tDirect])
		sums := map[string]float64{}
		for _, r := range append(traceRows[verb], traceRow{key: "total", title: "**the whole request, as the client timed it**"}) {
			p("| %s |", r.title)
			for _, tn := range traceTargets {
				v, ok := e.res.med(fmt.Sprintf("trace/%s/%s/%s", verb, tn, r.key))
				if !ok {
					p(" - |")
					continue
				}
				if r.key != "total" {
					sums[tn] += v
				}
				p(" %.3f |", v)
			}
			p("\n")
		}
		p("| the stages' medians, summed |")
		for _, tn := range traceTargets {
			p(" %.3f |", sums[tn])
		}
		p("\n\n")
		for _, tn := range traceTargets {
			if m, ok := e.res.notes[fmt.Sprintf("trace/%s/%s/incomplete", verb, tn)]; ok {
				p("%s traces of %s were incomplete and left out.\n\n", m, targetTitles[tn])
			}
		}
	}
	p("%s\n\n", traceEnd)
	return b.String()
}
