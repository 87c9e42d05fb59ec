package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/test/stats"
)

// The protocol scenario measures the aggregator's hop to mydb-apiserver
// over HTTP/2 and over HTTP/1.1 (mydb-apiserver's --disable-http2-serving)
// in one run: the trace scenario finds that hop, both ways, to be most of
// what a request through the aggregator costs more than one to a CRD. Each
// mode restarts mydb-apiserver with its flag, then creates and GETs through
// the aggregator and the CRD side by side.

type protocolMode struct {
	key, title, flags string
}

var protocolModes = []protocolMode{
	{"h2", "HTTP/2 to mydb-apiserver", "--disable-http2-serving=false"},
	{"h1", "HTTP/1.1 to mydb-apiserver", "--disable-http2-serving=true"},
}

// protocolClients are the create figures' client counts: one, the
// concurrency of the create figures, and more clients than the aggregator
// keeps idle connections to one server (25), where HTTP/1.1 must dial.
func (e *env) protocolClients() []int { return []int{1, e.o.concurrency, 64} }

func (e *env) scenarioProtocol(ctx context.Context) error {
	defer func() {
		// Back to the rig's own flags.
		if err := e.localUp(context.Background(), "RESTART_MYDB=1", "MYDB_APISERVER_FLAGS="); err != nil {
			e.logf("protocol: %v", err)
		}
	}()
	names := []string{tAggregated, tCRD}
	n := e.o.createN
	for _, m := range protocolModes {
		if err := e.localUp(ctx, "RESTART_MYDB=1", "MYDB_APISERVER_FLAGS="+m.flags); err != nil {
			return err
		}
		nss := map[string]string{}
		for _, tn := range names {
			ns, err := e.namespace(ctx, "protocol-"+m.key+"-"+tn)
			if err != nil {
				return err
			}
			nss[tn] = ns
		}
		// Warm up: connections, the delegated authorizer's cache.
		for _, tn := range names {
			if _, _, err := runCreates(ctx, e.targets[tn], nss[tn], "warm", 50, 1); err != nil {
				return err
			}
		}
		for rep := 0; rep < e.o.reps; rep++ {
			for _, conc := range e.protocolClients() {
				for _, tn := range rotate(names, rep) {
					key := fmt.Sprintf("protocol/%s/c%d/%s", m.key, conc, tn)
					rate, lats, err := runCreates(ctx, e.targets[tn], nss[tn], fmt.Sprintf("c%d-r%d", conc, rep), n, conc)
					if err != nil {
						return fmt.Errorf("%s: %w", key, err)
					}
					e.res.add(key+"/rate", rate)
					e.res.addLatencies(key, lats)
					e.logf("protocol %s create %-10s c=%-2d rep %d: %7.0f/s p50 %s", m.key, tn, conc, rep, rate, fmtMs(ms(stats.Percentile(lats, 50))))
					e.waitControllerIdle(ctx)
				}
			}
			for _, tn := range rotate(names, rep) {
				lats := make([]time.Duration, 0, e.o.getN)
				for i := 0; i < e.o.getN; i++ {
					name := fmt.Sprintf("c1-r%d-%05d", rep, i%n) // the one client's objects of this repetition
					t0 := time.Now()
					if err := e.targets[tn].get(ctx, nss[tn], name); err != nil {
						return fmt.Errorf("GET %s %s: %w", tn, name, err)
					}
					lats = append(lats, time.Since(t0))
				}
				e.res.addLatencies(fmt.Sprintf("protocol/%s/get/%s", m.key, tn), lats)
			}
			// A repetition's objects go before the next's, as in the
			// create figures: every run starts from the same store.
			for _, tn := range names {
				if err := e.targets[tn].deleteAll(ctx, nss[tn]); err != nil {
					return fmt.Errorf("cleaning %s: %w", tn, err)
				}
			}
			e.waitControllerIdle(ctx)
		}
	}
	return nil
}

// protocolSection is the protocol scenario's table ("" when it did not run).
func (e *env) protocolSection() string {
	if _, ok := e.res.med("protocol/h2/c1/" + tAggregated + "/rate"); !ok {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...interface{}) { fmt.Fprintf(&b, format, args...) }
	p("%s\n## The aggregator's hop: HTTP/2 or HTTP/1.1\n\n", protocolBegin)
	p("mydb-apiserver restarted in each mode (`--disable-http2-serving`), then %d creates per run through the aggregator and to the CRD, "+
		"rotated, %d repetitions (median), and %d GETs of one client. The ratio is the aggregator's rate over the CRD's in the same mode.\n\n",
		e.o.createN, e.o.reps, e.o.getN)
	p("| clients | ")
	for _, m := range protocolModes {
		p("%s: via aggregator | CRD | ratio | ", m.title)
	}
	p("\n|---|")
	for range protocolModes {
		p("---|---|---|")
	}
	p("\n")
	for _, conc := range e.protocolClients() {
		p("| %d client%s: creates/s (p50) | ", conc, plural(conc))
		for _, m := range protocolModes {
			a, _ := e.res.med(fmt.Sprintf("protocol/%s/c%d/%s/rate", m.key, conc, tAggregated))
			c, _ := e.res.med(fmt.Sprintf("protocol/%s/c%d/%s/rate", m.key, conc, tCRD))
			ap, _ := e.res.med(fmt.Sprintf("protocol/%s/c%d/%s/p50", m.key, conc, tAggregated))
			cp, _ := e.res.med(fmt.Sprintf("protocol/%s/c%d/%s/p50", m.key, conc, tCRD))
			p("%.0f (%s) | %.0f (%s) | %.2fx | ", a, fmtMs(ap), c, fmtMs(cp), a/c)
		}
		p("\n")
	}
	p("| GET p50 | ")
	for _, m := range protocolModes {
		a, _ := e.res.med(fmt.Sprintf("protocol/%s/get/%s/p50", m.key, tAggregated))
		c, _ := e.res.med(fmt.Sprintf("protocol/%s/get/%s/p50", m.key, tCRD))
		p("%s | %s | %+.2f ms | ", fmtMs(a), fmtMs(c), a-c)
	}
	p("\n\n%s\n\n", protocolEnd)
	return b.String()
}

const (
	protocolBegin = "<!-- protocol: written by the protocol scenario -->"
	protocolEnd   = "<!-- /protocol -->"
)
