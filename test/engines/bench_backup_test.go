//go:build engines

package engines

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/s3server"
)

// BenchmarkBackupAgainstTheEngineTool compares, side by side in one run,
// a backup through mydb-instance to a real S3 server with the engine's own
// tool streaming the same data by hand to the same server (SHA-256 of the
// stream, one multipart upload): pg_basebackup -Ft -X fetch -D -, and
// mariadb-backup --backup --stream=mbstream. Each iteration takes both,
// the one going first alternating; it reports both rates and their ratio
// (mydb/tool, the point-in-time issue asks for at least 0.9). The data is
// the engine's bulk table, about 60 MB.
//
//	make test-engines builds what it needs; then
//	MYDB_INSTANCE_BIN=$PWD/_output/bin/mydb-instance go test -tags engines -run '^$' \
//	  -bench BenchmarkBackupAgainstTheEngineTool -benchtime 5x ./test/engines/
func BenchmarkBackupAgainstTheEngineTool(b *testing.B) {
	for _, e := range []struct {
		spec   engineSpec
		prefix string
		tool   func(n *node, scratch string) *exec.Cmd
	}{
		{postgresSpec(), "127.0.103.", func(n *node, _ string) *exec.Cmd {
			return exec.Command(filepath.Join(pgBin, "pg_basebackup"), "--pgdata=-", "--format=tar", "--wal-method=fetch",
				"--checkpoint=fast", "--no-password", "--host="+n.runDir, fmt.Sprintf("--port=%d", n.port), "--username=postgres")
		}},
		{mariadbSpec(), "127.0.104.", func(n *node, scratch string) *exec.Cmd {
			return exec.Command("mariadb-backup", "--no-defaults", "--backup", "--stream=mbstream", "--target-dir="+scratch,
				"--socket="+filepath.Join(n.runDir, "mariadbd.sock"), "--user=mysql", "--skip-ssl", "--parallel=2")
		}},
	} {
		// Set up once: the sub-benchmark's function runs more than once
		// (for 1 iteration, then for -benchtime's).
		s3 := s3server.Start(b, s3server.Options{})
		store := s3.Store(b)
		c := newClusterIn(b, e.spec, "bench-backup-"+e.spec.name, e.prefix, 1)
		p := c.nodes[0]
		p.start()
		c.setPrimary(p)
		p.waitReady(2*time.Minute, api.RolePrimary)
		for _, stmt := range e.spec.bulkLoad {
			mustExec(b, p.app(), stmt)
		}
		taken := 0 // backups so far, for their names
		b.Run(e.spec.name, func(b *testing.B) {
			ctx := context.Background()
			var mydbTime, toolTime time.Duration
			var mydbBytes, toolBytes int64
			viaMydb := func(i int) {
				began := time.Now()
				op := p.backup(b, fmt.Sprintf("bench-%d", i), s3, fmt.Sprintf("mydb/%d", i))
				mydbTime += time.Since(began)
				mydbBytes += op.Size
			}
			byHand := func(i int) {
				scratch := filepath.Join(c.dir, fmt.Sprintf("tool-%d", i))
				c.mkdir(scratch, 0o700)
				cmd := e.tool(p, scratch)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
				cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				began := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				obj, err := store.Put(ctx, fmt.Sprintf("tool/%d", i), io.TeeReader(out, h))
				if werr := cmd.Wait(); err != nil || werr != nil {
					b.Fatalf("%s by hand: upload %v, tool %v", e.spec.name, err, werr)
				}
				_ = h.Sum(nil) // what the backup would record
				toolTime += time.Since(began)
				toolBytes += obj.Size
			}
			b.ResetTimer()
			for range b.N {
				taken++
				if taken%2 == 0 {
					byHand(taken)
					viaMydb(taken)
				} else {
					viaMydb(taken)
					byHand(taken)
				}
			}
			b.StopTimer()
			mib := func(n int64, d time.Duration) float64 { return float64(n) / (1 << 20) / d.Seconds() }
			b.ReportMetric(mib(mydbBytes, mydbTime), "mydb-MiB/s")
			b.ReportMetric(mib(toolBytes, toolTime), "tool-MiB/s")
			b.ReportMetric(mib(mydbBytes, mydbTime)/mib(toolBytes, toolTime), "mydb/tool")
		})
	}
}
