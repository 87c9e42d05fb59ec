//go:build engines

package engines

import (
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/s3server"
)

// archivedRE is the manager's line for each file it uploaded.
var archivedRE = regexp.MustCompile(`msg=archived .*seconds=([0-9.e-]+)`)

// BenchmarkPostgresArchiveKeepsUpWithAWriter: two single writers on a
// primary archiving to a real S3 server: the fastest here (one session
// rewriting the bulk table, about 70 MiB of WAL a statement, twice an
// iteration) and one pgbench client (TPC-B-like, 10 s). Each reports the
// writer's WAL rate; the rate at which the closed
// segments were archived, from the writer's start to the last one's
// upload; how long after the writer ended the archive caught up; and
// each segment upload's p50 and p99, from the manager's log.
//
//	MYDB_INSTANCE_BIN=$PWD/_output/bin/mydb-instance go test -tags engines -run '^$' \
//	  -bench BenchmarkPostgresArchiveKeepsUpWithAWriter -benchtime 3x ./test/engines/
func BenchmarkPostgresArchiveKeepsUpWithAWriter(b *testing.B) {
	s3 := s3server.Start(b, s3server.Options{})
	spec := postgresSpec()
	p := archivingPrimary(b, spec, "bench-archive", "127.0.107.", 10*time.Second)
	p.setArchive(b, *destination(s3, "bench/archive").S3)
	for _, stmt := range spec.bulkLoad {
		mustExec(b, p.app(), stmt)
	}
	lsn := func() uint64 {
		var s string
		if err := p.app().QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&s); err != nil {
			b.Fatal(err)
		}
		n, err := api.ParseLSN(s)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	// pgbench's tables for its TPC-B-like transactions, scale 10.
	pgbench := func(args ...string) {
		cmd := exec.Command(filepath.Join(pgBin, "pgbench"), append([]string{"--host=" + p.host, fmt.Sprintf("--port=%d", p.port),
			"--username=" + p.c.secrets[instance.SecretUsername]}, args...)...)
		cmd.Env = []string{"PGPASSWORD=" + p.c.secrets[instance.SecretPassword], "PGDATABASE=" + p.c.secrets[instance.SecretDatabase], "PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("pgbench %s: %v: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
		}
	}
	pgbench("--initialize", "--scale=10", "--quiet")
	// Set up once, above: a sub-benchmark's function runs more than once
	// (for 1 iteration, then for -benchtime's).
	for _, w := range []struct {
		name  string
		write func()
	}{
		{"bulk-updates", func() {
			for range 2 {
				mustExec(b, p.app(), "UPDATE bulk SET v = v || 'x'")
			}
		}},
		// A single pgbench client, TPC-B-like, for 10 s.
		{"pgbench-1-client", func() { pgbench("--client=1", "--time=10", "--no-vacuum") }},
	} {
		b.Run(w.name, func(b *testing.B) {
			var written, archived float64 // bytes
			var writing, archiving, behind time.Duration
			var uploads []float64
			for range b.N {
				logFrom := int64(len(p.logSince(0)))
				from, began := lsn(), time.Now()
				w.write()
				to, ended := lsn(), time.Now()
				// The segments closed while writing: every one before
				// the one written now.
				lastClosed := api.WALSegmentName(1, to/api.WALSegmentSize-1)
				p.waitStatus(5*time.Minute, "the archive to hold "+lastClosed, func(s api.Status) bool {
					return s.Archive != nil && path.Base(s.Archive.LastArchived) >= lastClosed
				})
				caughtUp := time.Now()
				written += float64(to - from)
				archived += float64((to/api.WALSegmentSize - from/api.WALSegmentSize) * api.WALSegmentSize)
				writing += ended.Sub(began)
				archiving += caughtUp.Sub(began)
				behind += caughtUp.Sub(ended)
				for _, m := range archivedRE.FindAllStringSubmatch(p.logSince(logFrom), -1) {
					if s, err := strconv.ParseFloat(m[1], 64); err == nil {
						uploads = append(uploads, s)
					}
				}
			}
			b.StopTimer()
			mib := func(n float64, d time.Duration) float64 { return n / (1 << 20) / d.Seconds() }
			b.ReportMetric(mib(written, writing), "writer-MiB/s")
			b.ReportMetric(mib(archived, archiving), "archived-MiB/s")
			b.ReportMetric(behind.Seconds()/float64(b.N), "caught-up-s")
			if len(uploads) > 0 {
				slices.Sort(uploads)
				pct := func(q float64) float64 { return uploads[min(len(uploads)-1, int(q*float64(len(uploads))))] }
				b.ReportMetric(pct(0.5), "upload-p50-s")
				b.ReportMetric(pct(0.99), "upload-p99-s")
				b.Logf("%d uploads of 16 MiB: p50 %.3f s, p99 %.3f s", len(uploads), pct(0.5), pct(0.99))
			}
		})
	}
}
