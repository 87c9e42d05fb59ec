package plugin

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// instanceFigures reads an instance's /metrics through kube-apiserver's
// pod proxy (the caller needs get on pods/proxy), as of now.
func instanceFigures(ctx context.Context, kube kubernetes.Interface, ns, pod string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	data, err := kube.CoreV1().Pods(ns).ProxyGet("https", pod, strconv.Itoa(api.MetricsPort), api.PathMetrics, nil).DoRaw(ctx)
	if err != nil {
		// The proxy's own refusals (an address it does not proxy to, a
		// pod that does not answer) come as text, not as a Status.
		if text := strings.TrimSpace(string(data)); text != "" && len(text) < 200 {
			return nil, fmt.Errorf("%w: %s", err, text)
		}
		return nil, err
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	return parser.TextToMetricFamilies(bytes.NewReader(data))
}

// figuresLine says in one line what an instance's figures show: its lag
// (a replica), connections, commits since the engine started, the size of
// its databases and how full its volume is.
func figuresLine(engine examplev1.Engine, fams map[string]*dto.MetricFamily) string {
	var parts []string
	if lag, ok := sum(fams, "mydb_replication_lag_seconds", nil); ok {
		parts = append(parts, "lag "+strconv.FormatFloat(lag, 'f', -1, 64)+"s")
	}
	connections, commits, size := "mysql_global_status_threads_connected", "mysql_global_status_handlers_total", "mydb_database_size_bytes"
	commitLabel := map[string]string{"handler": "commit"}
	if engine == examplev1.EnginePostgres {
		connections, commits, size, commitLabel = "pg_stat_database_numbackends", "pg_stat_database_xact_commit", "pg_database_size_bytes", nil
	}
	if n, ok := sum(fams, connections, nil); ok {
		parts = append(parts, count(n, "connection"))
	}
	if n, ok := sum(fams, commits, commitLabel); ok {
		parts = append(parts, count(n, "commit"))
	}
	if n, ok := sum(fams, size, nil); ok {
		parts = append(parts, "databases "+bytesText(n))
	}
	used, okUsed := sum(fams, "mydb_volume_used_bytes", nil)
	total, okSize := sum(fams, "mydb_volume_size_bytes", nil)
	if okUsed && okSize && total > 0 {
		parts = append(parts, fmt.Sprintf("volume %.0f%% used", 100*used/total))
	}
	if restarts, ok := sum(fams, "mydb_engine_restarts_total", nil); ok && restarts > 0 {
		parts = append(parts, count(restarts, "engine restart"))
	}
	if len(parts) == 0 {
		return "<no figures>"
	}
	return strings.Join(parts, ", ")
}

// count is "n things", or "1 thing".
func count(n float64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%.0f %ss", n, thing)
}

// sum adds the values of name's series whose labels include want's.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
	total, found := 0.0, false
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		default:
			continue
		}
		found = true
	}
	return total, found
}

// bytesText is n bytes in the largest binary unit that keeps it >= 1.
func bytesText(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
