package main

import (
	"math"
	"testing"
	"time"
)

// A trace as the servers report an aggregated create, times in
// microseconds after the client sent it: kube-apiserver's request and
// filters, the aggregator's proxy span, mydb-apiserver's request, filters,
// handler and storage spans.
func aggregatedCreateTrace(sent time.Time, clientSpan string) map[string]*span {
	us := func(v int64) int64 { return sent.UnixNano() + v*1000 }
	mk := func(id, parent, name string, kind int, start, end int64, events map[string]int64) *span {
		ev := map[string]int64{}
		for k, v := range events {
			ev[k] = us(v)
		}
		return &span{id: id, parent: parent, name: name, kind: kind, start: us(start), end: us(end), events: ev}
	}
	spans := []*span{
		mk("k", clientSpan, "POST /apis/example.com/v1/namespaces/{:namespace}/mydatabases", 2, 300, 2800, nil),
		mk("ka", "k", "audit", 1, 310, 2790, nil),
		mk("kp", "ka", "priorityandfairness", 1, 320, 2790, nil),
		mk("kz", "kp", "authorization", 1, 360, 2780, nil),
		mk("p", "kz", "HTTP POST", 3, 400, 2700, nil),
		mk("m", "p", "POST /apis/example.com/v1/namespaces/{:namespace}/mydatabases", 2, 700, 2200, nil),
		mk("ma", "m", "audit", 1, 705, 2195, nil),
		mk("mz", "ma", "authorization", 1, 740, 2190, nil),
		mk("h", "mz", "Create", 1, 760, 2150, map[string]int64{
			"Conversion done":                   820,
			"About to store object in database": 825,
			"Write to database call succeeded":  2000,
			"About to write a response":         2001,
			"Writing http response done":        2100,
		}),
		mk("s", "h", "Create etcd3", 1, 1100, 1990, map[string]int64{
			"TransformToStorage succeeded": 1120,
			"Txn call succeeded":           1900,
		}),
	}
	out := map[string]*span{}
	for _, s := range spans {
		out[s.id] = s
	}
	return out
}

func TestTraceStagesOfAnAggregatedCreate(t *testing.T) {
	sent := time.Unix(1000, 0)
	tr := &traced{traceID: "t", spanID: "c", sent: sent, received: sent.Add(3100 * time.Microsecond)}
	stages, err := traceStages("create", tAggregated, tr, aggregatedCreateTrace(sent, "c"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range stages {
		got[s.key] = s.ms
	}
	want := map[string]float64{
		"to-server":    0.300,
		"kube-authn":   0.010,
		"kube-filters": 0.050, // audit to authorization
		"kube-authz":   0.040, // authorization to the proxy
		"proxy":        0.300,
		"mydb-authn":   0.005,
		"mydb-filters": 0.035,
		"mydb-authz":   0.020,
		"decode":       0.060,
		"before-store": 0.005,
		"admission":    0.275,
		"encode":       0.020,
		"etcd":         0.780,
		"after-store":  0.100,
		"response":     0.100,
		"unwind":       0.100,
		"proxy-back":   0.600,
		"to-client":    0.300,
		"total":        3.100,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("stage %s = %v (found %v), want %v", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stages %v, want exactly %v", got, want)
	}
	// The stages between the client's send and receipt add up to the whole.
	var sum float64
	for k, v := range got {
		if k != "total" {
			sum += v
		}
	}
	if math.Abs(sum-got["total"]) > 1e-9 {
		t.Errorf("stages sum to %v, the request took %v", sum, got["total"])
	}
}

func TestTraceStagesRefuseATraceWithoutTheServersSpans(t *testing.T) {
	sent := time.Unix(1000, 0)
	tr := &traced{traceID: "t", spanID: "other", sent: sent, received: sent.Add(time.Millisecond)}
	if _, err := traceStages("create", tAggregated, tr, aggregatedCreateTrace(sent, "c")); err == nil {
		t.Error("a trace whose server span hangs from another client span was accepted")
	}
	spans := aggregatedCreateTrace(sent, "c")
	delete(spans, "h")
	tr.spanID = "c"
	if _, err := traceStages("create", tAggregated, tr, spans); err == nil {
		t.Error("a trace without the handler's span was accepted")
	}
}
