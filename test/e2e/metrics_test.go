//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/mydb-dev/mydb/pkg/names"
)

// TestMetricsScrapedByPrometheus, on the rig: a real Prometheus server
// (built from the Go module proxy by hack/build-tools.sh) discovers the
// instances of a PostgreSQL and a MariaDB database of three instances each
// through the rig's kube-apiserver, with the scrape configuration mydb ships
// (artifacts/monitoring/prometheus-scrape.yaml: Kubernetes pod discovery,
// TLS verified against each database's <db>-ca-bundle), and:
//   - every instance is a target that is up;
//   - a query for replication lag returns one value per replica, the
//     replicas the database's status names (mydb's own name and the
//     exporters' names, postgres_exporter's and mysqld_exporter's);
//   - every query of the shipped Grafana dashboard
//     (artifacts/monitoring/grafana-dashboard.json) is valid PromQL and
//     returns figures for one of the engines, except those of point-in-time
//     recovery, which these databases do not use;
//   - kubectl get mdb -o wide shows each replica's lag, read from its
//     manager at the time of the read.
//
// (kubectl mydb status's live figures come through kube-apiserver's pod
// proxy, which refuses the rig's loopback pod IPs: TestNodeDatabases checks
// them on the real node.)
func TestMetricsScrapedByPrometheus(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(repoRoot, "_output", "bin", "prometheus")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v (hack/build-tools.sh prometheus builds it)", err)
	}
	type database struct {
		engine   string
		ns       string
		primary  string
		replicas []string
	}
	var dbs []database
	dir := t.TempDir()
	var jobs []any
	template := shippedScrapeConfig(t)
	for _, tc := range replicationCases {
		_, _, h, status := startShop(t, restConfig(t), tc, 0, "")
		db := database{engine: tc.engine.name, ns: h.ns, primary: status.CurrentPrimary}
		for _, in := range status.Instances {
			if in.Name != status.CurrentPrimary {
				db.replicas = append(db.replicas, in.Name)
			}
		}
		sort.Strings(db.replicas)
		dbs = append(dbs, db)
		bundle, err := kubeClient(t).CoreV1().Secrets(h.ns).Get(context.Background(), names.CABundleSecret("shop"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		caFile := filepath.Join(dir, db.engine+"-ca.crt")
		if err := os.WriteFile(caFile, bundle.Data["ca.crt"], 0o600); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, scrapeJob(t, template, "mydb-"+db.engine, h.ns, caFile))
	}

	config, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s"},
		"scrape_configs": jobs,
	})
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		t.Fatal(err)
	}
	address := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+configFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+address)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("=== the last lines of Prometheus' log ===\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
	query := func(q string) ([]promSeries, error) { return promQuery(address, q) }

	start := time.Now()
	eventually(t, 90*time.Second, func() error {
		series, err := query(`up{job=~"mydb-.*"}`)
		if err != nil {
			return err
		}
		up := 0
		for _, s := range series {
			if s.value == 1 {
				up++
			}
		}
		if want := 3 * len(dbs); up != want {
			return fmt.Errorf("%d targets up of %d (want %d): %v", up, len(series), want, series)
		}
		return nil
	})
	t.Logf("Prometheus scrapes all %d instances, %s after it started", 3*len(dbs), time.Since(start).Round(100*time.Millisecond))

	// The exporters' lag: postgres_exporter's is 0 on a primary too, so a
	// replica's is where pg_replication_is_replica says so.
	lagOf := map[string]string{
		"postgres": `pg_replication_lag_seconds{%[1]s} and on(pod) (pg_replication_is_replica{%[1]s} == 1)`,
		"mariadb":  `mysql_slave_status_seconds_behind_master{%[1]s}`,
		"mysql":    `mysql_slave_status_seconds_behind_master{%[1]s}`,
	}
	for _, db := range dbs {
		selector := fmt.Sprintf(`namespace=%q,database="shop"`, db.ns)
		for _, metric := range []string{`mydb_replication_lag_seconds{%[1]s}`, lagOf[db.engine]} {
			metric = fmt.Sprintf(metric, selector)
			eventually(t, 30*time.Second, func() error {
				series, err := query(metric)
				if err != nil {
					return err
				}
				var pods []string
				for _, s := range series {
					pods = append(pods, s.labels["pod"])
				}
				sort.Strings(pods)
				if !slices.Equal(pods, db.replicas) {
					return fmt.Errorf("%s of %s: a value for %v, want one for each replica %v", metric, db.engine, pods, db.replicas)
				}
				t.Logf("%s: %s = %v", db.engine, metric, series)
				return nil
			})
		}
		series, err := query(fmt.Sprintf(`mydb_instance_primary{namespace=%q} == 1`, db.ns))
		if err != nil || len(series) != 1 || series[0].labels["pod"] != db.primary {
			t.Errorf("%s: the primary by mydb_instance_primary: %v, %v; want %s", db.engine, series, err, db.primary)
		}
	}

	// kubectl get mdb -o wide: each replica's lag, read from its manager at
	// the time of the read; and what that costs a read (figures, not
	// bounds: a rig measurement).
	for _, db := range dbs {
		eventually(t, 10*time.Second, func() error {
			out, err := kubectl(t, "", "get", "mdb", "shop", "-n", db.ns, "-o", "wide").stdout, error(nil)
			for _, r := range db.replicas {
				if !strings.Contains(out, r+"=") || strings.Contains(out, r+"=?") {
					err = fmt.Errorf("kubectl get mdb -o wide shows no lag of %s:\n%s", r, out)
				}
			}
			if err == nil {
				t.Logf("%s: kubectl get mdb -o wide:\n%s", db.engine, out)
			}
			return err
		})
	}
	timeReads(t, dbs[0].ns)

	// The dashboard's queries, for each database as its variables choose,
	// once every target has been scraped a few times (rates need two
	// samples).
	eventually(t, 30*time.Second, func() error {
		series, err := query(`min(count_over_time(up{job=~"mydb-.*"}[1m]))`)
		if err != nil || len(series) != 1 || series[0].value < 5 {
			return fmt.Errorf("fewer than 5 scrapes of some target: %v, %v", series, err)
		}
		return nil
	})
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "artifacts", "monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	// Point-in-time recovery's panels have figures only where it is on.
	noFiguresHere := []string{"WAL archive: files waiting", "Recoverable up to (age)"}
	for _, panel := range dashboard.Panels {
		for _, target := range panel.Targets {
			figures := 0
			for _, db := range dbs {
				expr := strings.NewReplacer("$namespace", db.ns, "$database", "shop").Replace(target.Expr)
				series, err := query(expr)
				if err != nil {
					t.Errorf("panel %q: %s: %v", panel.Title, expr, err)
				}
				figures += len(series)
			}
			if figures == 0 && !slices.Contains(noFiguresHere, panel.Title) {
				t.Errorf("panel %q: %s returns nothing for either database", panel.Title, target.Expr)
			}
		}
	}
}

// shippedScrapeConfig is the job of artifacts/monitoring/prometheus-scrape.yaml.
func shippedScrapeConfig(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "artifacts", "monitoring", "prometheus-scrape.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil || len(file.ScrapeConfigs) != 1 {
		t.Fatalf("prometheus-scrape.yaml: %v, %d jobs (want 1)", err, len(file.ScrapeConfigs))
	}
	return file.ScrapeConfigs[0]
}

// scrapeJob is the shipped job for the database "shop" of namespace ns, as
// its instructions say to make one: its name, the CA file and the
// namespace; and, off the cluster, the rig's kubeconfig for discovery.
func scrapeJob(t *testing.T, template map[string]any, name, ns, caFile string) map[string]any {
	t.Helper()
	data, err := json.Marshal(template)
	if err != nil {
		t.Fatal(err)
	}
	var job map[string]any
	if err := json.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	job["job_name"] = name
	job["tls_config"].(map[string]any)["ca_file"] = caFile
	sd := job["kubernetes_sd_configs"].([]any)[0].(map[string]any)
	sd["namespaces"] = map[string]any{"names": []string{ns}}
	sd["kubeconfig_file"] = kubeconfig
	return job
}

type promSeries struct {
	labels map[string]string
	value  float64
}

func (s promSeries) String() string { return fmt.Sprintf("%s=%v", s.labels["pod"], s.value) }

// promQuery runs an instant query on the Prometheus server at address.
func promQuery(address, q string) ([]promSeries, error) {
	resp, err := http.Get("http://" + address + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  []any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", body.Status, body.Error)
	}
	var out []promSeries
	switch body.Data.ResultType {
	case "vector":
	case "scalar":
		return []promSeries{{}}, nil
	default:
		return nil, fmt.Errorf("result type %s", body.Data.ResultType)
	}
	for _, r := range body.Data.Result {
		s := promSeries{labels: r.Metric}
		if len(r.Value) == 2 {
			text, _ := r.Value[1].(string)
			s.value, _ = strconv.ParseFloat(text, 64)
		}
		out = append(out, s)
	}
	return out, nil
}

// checkLiveFigures runs kubectl mydb status for the database "shop" of ns
// and checks that it prints each instance's live figures, read through
// kube-apiserver's pod proxy: connections and commits for every instance,
// the lag of the replicas.
func checkLiveFigures(t *testing.T, ns, primary string) {
	t.Helper()
	out := kubectlMydb(t, "status", "shop", "-n", ns)
	if out.err != nil {
		t.Fatalf("kubectl mydb status: %s", out)
	}
	_, figures, found := strings.Cut(out.stdout, "Live figures")
	if !found {
		t.Fatalf("kubectl mydb status printed no live figures:\n%s", out.stdout)
	}
	lines := strings.Split(strings.TrimSpace(figures), "\n")
	if len(lines) < 4 {
		t.Fatalf("kubectl mydb status's live figures:%s", figures)
	}
	for _, line := range lines[1:4] {
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.Contains(line, "connection") || !strings.Contains(line, "commit") ||
			(fields[0] == primary) == strings.Contains(line, "lag ") {
			t.Errorf("kubectl mydb status's figures line %q (the primary is %s)", line, primary)
		}
	}
	t.Logf("kubectl mydb status's live figures:%s", strings.Join(lines[:4], "\n"))
}

// timeReads logs the median time of a GET of the database "shop" of ns
// through the aggregation layer as a Table (with the Replica Lag column,
// its answers kept or asked anew) and as JSON, in one run.
func timeReads(t *testing.T, ns string) {
	t.Helper()
	cfg := restConfig(t)
	// Not client-go's default 5 requests a second, which would be what
	// back-to-back reads measure.
	cfg.QPS, cfg.Burst = 1000, 1000
	rc := mydbClient(t, cfg).ExampleV1().RESTClient()
	median := func(n int, accept string, pause time.Duration) time.Duration {
		var took []time.Duration
		for range n {
			start := time.Now()
			if err := rc.Get().Namespace(ns).Resource("mydatabases").Name("shop").SetHeader("Accept", accept).Do(context.Background()).Error(); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start))
			time.Sleep(pause)
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	const table = "application/json;as=Table;v=v1;g=meta.k8s.io"
	warm := median(30, table, 0)
	// Past the answers' TTL, each read asks the managers again.
	fresh := median(11, table, 2100*time.Millisecond)
	plain := median(30, "application/json", 0)
	t.Logf("GET mydatabases/shop through the aggregator, median: JSON %s (30 reads); Table with the replicas' lag kept %s (30), asked anew %s (11)",
		plain.Round(10*time.Microsecond), warm.Round(10*time.Microsecond), fresh.Round(10*time.Microsecond))
}
