//go:build e2e && node

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mydb-dev/mydb/pkg/access"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

// largeResultBytes is the size of the result the throughput benchmark
// reads: 100 rows of 1 MiB.
const largeResultBytes = 100 << 20

// TestNodeTunnelThroughput benchmarks (testing.Benchmark, b.SetBytes) a
// 100 MiB result read from a primary on the real node two ways, side by
// side in one run, three rounds alternating: through mydatabases/connect
// (kube-apiserver's aggregation layer, then mydb-apiserver, as kubectl
// mydb connect tunnels) and through `kubectl port-forward` to the same
// pod (kube-apiserver, then the kubelet's streaming server). Both carry
// the engine's TLS. It reports each path's median MB/s and their ratio;
// it fails only when a path fails, not on a figure.
func TestNodeTunnelThroughput(t *testing.T) {
	for _, e := range []struct{ engine, version string }{{"postgres", "17"}, {"mariadb", "10.11"}} {
		t.Run(e.engine, func(t *testing.T) { nodeTunnelThroughput(t, e.engine, e.version) })
	}
}

func nodeTunnelThroughput(t *testing.T, engine, version string) {
	ns := newNamespace(t)
	ctx := context.Background()
	mydb := mydbClient(t, restConfig(t))
	mustKubectl(t, fmt.Sprintf(`apiVersion: example.com/v1
kind: MyDatabase
metadata:
  name: shop
spec:
  engine: %s
  version: "%s"
  replicas: 1
  storageSize: 1Gi
`, engine, version), "apply", "-n", ns, "-f", "-")
	var db *examplev1.MyDatabase
	eventually(t, 8*time.Minute, func() (err error) {
		db, err = mydb.ExampleV1().MyDatabases(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(db.Status.Conditions, examplev1.ConditionReady) {
			return fmt.Errorf("not Ready yet: %s", podPhases(t, ns))
		}
		return nil
	})
	cred, err := mydb.ExampleV1().MyDatabases(ns).CreateCredentials(ctx, "shop", &examplev1.MyDatabaseCredentialRequest{
		Spec: examplev1.MyDatabaseCredentialRequestSpec{ExpirationSeconds: ptr.To[int64](1800)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := cred.Status

	// The tunnel as kubectl mydb connect makes it: a local listener, a
	// tunnel per connection.
	cfg := restConfig(t)
	tunnelPort := listenTunnels(t, func(ctx context.Context) (*access.TunnelConn, error) {
		return access.DialTunnel(ctx, cfg, ns, "shop", "")
	}, nil)

	read := func(port int) (int64, error) {
		if engine == "postgres" {
			conn, err := pgx.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=require connect_timeout=10",
				port, s.Username, s.Password, s.Database))
			if err != nil {
				return 0, err
			}
			defer conn.Close(ctx)
			tag, err := conn.PgConn().CopyTo(ctx, io.Discard,
				"COPY (SELECT repeat('x', 1048576) FROM generate_series(1, 100)) TO STDOUT")
			return tag.RowsAffected() << 20, err
		}
		db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s?timeout=10s&tls=skip-verify", s.Username, s.Password, port, s.Database))
		if err != nil {
			return 0, err
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT REPEAT('x', 1048576) FROM n")
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		var total int64
		for rows.Next() {
			var b sql.RawBytes
			if err := rows.Scan(&b); err != nil {
				return total, err
			}
			total += int64(len(b))
		}
		return total, rows.Err()
	}
	bench := func(path string, port func() (int, func(), error)) float64 {
		var failed error
		res := testing.Benchmark(func(b *testing.B) {
			b.SetBytes(largeResultBytes)
			for range b.N {
				b.StopTimer()
				p, stop, err := port()
				if err != nil {
					failed = err
					b.FailNow()
				}
				b.StartTimer()
				n, err := read(p)
				b.StopTimer()
				stop()
				b.StartTimer()
				if err == nil && n != largeResultBytes {
					err = fmt.Errorf("read %d bytes, want %d", n, largeResultBytes)
				}
				if err != nil {
					failed = err
					b.FailNow()
				}
			}
		})
		if failed != nil {
			t.Fatalf("%s: %v", path, failed)
		}
		mbs := float64(res.Bytes) * float64(res.N) / 1e6 / res.T.Seconds()
		t.Logf("%s %s: %s (%.1f MB/s)", engine, path, res, mbs)
		return mbs
	}
	var tunnel, forward []float64
	for range 3 {
		tunnel = append(tunnel, bench("mydatabases/connect", func() (int, func(), error) { return tunnelPort, func() {}, nil }))
		// A port-forward per read, started before the clock does: kubectl
		// port-forward may exit once a session through it ends (see
		// TestNodeDatabases).
		forward = append(forward, bench("kubectl port-forward", func() (int, func(), error) {
			return startPortForward(ns, "pod/"+db.Status.CurrentPrimary, enginePort(engine))
		}))
	}
	tm, fm := median(tunnel), median(forward)
	t.Logf("%s, a 100 MiB result, median of 3 rounds: mydatabases/connect %.1f MB/s, kubectl port-forward %.1f MB/s: %.2fx", engine, tm, fm, tm/fm)
}

func enginePort(engine string) int {
	if engine == "postgres" {
		return 5432
	}
	return 3306
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
