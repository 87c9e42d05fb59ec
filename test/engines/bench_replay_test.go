//go:build engines

package engines

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/s3server"
)

// redoDoneRE is PostgreSQL's own measure of a recovery's replay: "redo
// done at 0/9000060 system usage: CPU: ... elapsed: 1.23 s".
var redoDoneRE = regexp.MustCompile(`redo done at ([0-9A-F]+/[0-9A-F]+) system usage: .*elapsed: ([0-9.]+) s`)

// BenchmarkPostgresReplayAgainstRecoveryFromACopy compares, side by side
// in one run, the replay of a restore to a point through mydb (each
// segment fetched from a real S3 server by the engine's restore_command,
// mydb-instance, through the manager, which fetches ahead) with
// PostgreSQL's own recovery of the same base backup from a local copy of
// the same segments (restore_command = 'cp'). Both replay to the end of
// the archive; each iteration runs both, the one going first alternating.
// The rates are PostgreSQL's own figures (WAL replayed over the elapsed
// time of its "redo done" line), and their ratio mydb/cp (the
// point-in-time issue asks for at least 0.9).
//
//	MYDB_INSTANCE_BIN=$PWD/_output/bin/mydb-instance go test -tags engines -run '^$' \
//	  -bench BenchmarkPostgresReplayAgainstRecoveryFromACopy -benchtime 3x ./test/engines/
func BenchmarkPostgresReplayAgainstRecoveryFromACopy(b *testing.B) {
	s3 := s3server.Start(b, s3server.Options{})
	store := s3.Store(b)
	ctx := context.Background()
	spec := postgresSpec()

	p := archivingPrimary(b, spec, "bench-replay-src", "127.0.105.", 10*time.Second)
	archive := destination(s3, "bench/replay").S3
	p.setArchive(b, *archive)
	base := p.backup(b, "bench-replay-base", s3, "bench/replay-base")
	// WAL to replay: the bulk table's 60 MB, then every row rewritten
	// three times: about 300 MiB.
	for _, stmt := range spec.bulkLoad {
		mustExec(b, p.app(), stmt)
	}
	for range 3 {
		mustExec(b, p.app(), "UPDATE bulk SET v = v || 'x'")
	}
	var last string
	if err := p.app().QueryRow("SELECT pg_walfile_name(pg_current_wal_lsn())").Scan(&last); err != nil {
		b.Fatal(err)
	}
	// archive_timeout (10 s) closes it.
	p.waitStatus(2*time.Minute, "the archive to hold "+last, func(s api.Status) bool {
		return s.Archive != nil && s.Archive.Pending == 0 && path.Base(s.Archive.LastArchived) >= last
	})

	// The local copy: the base backup unpacked and every archived segment.
	c := p.c
	local := filepath.Join(c.dir, "copy")
	walDir := filepath.Join(local, "wal")
	c.mkdir(local, 0o700)
	c.mkdir(walDir, 0o700)
	objects, err := store.List(ctx, archive.Key+"/wal/")
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objects {
		rc, err := store.Get(ctx, o.Key)
		if err != nil {
			b.Fatal(err)
		}
		c.writeFileFrom(filepath.Join(walDir, path.Base(o.Key)), rc)
		rc.Close()
	}
	baseTar := filepath.Join(local, "base.tar")
	rc, err := store.Get(ctx, "bench/replay-base")
	if err != nil {
		b.Fatal(err)
	}
	c.writeFileFrom(baseTar, rc)
	rc.Close()
	b.Logf("%d archived segments after the base backup (ending at %s), the last %s", len(objects), base.Position.LSN, last)

	// Set up once, above: the sub-benchmark's function runs more than
	// once (for 1 iteration, then for -benchtime's).
	runs := 0
	b.Run("to-the-end", func(b *testing.B) {
		var mydbSeconds, copySeconds float64
		var replayed float64 // bytes of WAL, the same each time
		viaMydb := func(i int) {
			n := awaitingRestore(b, spec, fmt.Sprintf("bench-replay-dst%d", i), "127.0.106.")
			from := int64(0)
			mc, host := n.manager()
			if _, err := mc.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
				ID: fmt.Sprintf("bench-replay-%d", i), Source: destination(s3, "bench/replay-base"),
				SHA256: base.SHA256, Size: base.Size, Format: base.Format,
				Archive: archive, Target: &api.RecoveryTarget{Latest: true},
			}); err != nil {
				b.Fatal(err)
			}
			n.waitReady(5*time.Minute, api.RolePrimary)
			bytes, seconds := redoDone(b, base.Position.LSN, n.logSince(from))
			mydbSeconds += seconds
			replayed = bytes
			_, _ = n.stop()
		}
		byCopy := func(i int) {
			dir := filepath.Join(local, fmt.Sprintf("pgdata-%d", i))
			c.mkdir(dir, 0o700)
			if out, err := exec.Command("tar", "-xf", baseTar, "-C", dir).CombinedOutput(); err != nil {
				b.Fatalf("tar: %v: %s", err, out)
			}
			if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", c.uid, c.gid), dir).CombinedOutput(); err != nil {
				b.Fatalf("chown: %v: %s", err, out)
			}
			c.writeFile(filepath.Join(dir, "recovery.signal"), "", 0o600)
			logPath := filepath.Join(local, fmt.Sprintf("postgres-%d.log", i))
			logFile, err := os.Create(logPath)
			if err != nil {
				b.Fatal(err)
			}
			defer logFile.Close()
			// No hot standby: the server answers only once recovery is over.
			cmd := exec.Command(filepath.Join(pgBin, "postgres"), "-D", dir, "-c", "listen_addresses=", "-c", "unix_socket_directories="+dir,
				"-c", "hot_standby=off", "-c", "archive_mode=off", "-c", "ssl=off", "-c", "recovery_target_timeline=latest",
				"-c", "restore_command=cp "+walDir+"/%f %p")
			cmd.Stdout, cmd.Stderr = logFile, logFile
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGINT)
				_ = cmd.Wait()
			}()
			var log string
			waitFor(b, 5*time.Minute, "PostgreSQL's recovery from the copy", func() error {
				raw, _ := os.ReadFile(logPath)
				if log = string(raw); !strings.Contains(log, "database system is ready to accept connections") {
					return fmt.Errorf("not ready yet: %s", lastLines(log, 3))
				}
				return nil
			})
			bytes, seconds := redoDone(b, base.Position.LSN, log)
			copySeconds += seconds
			if bytes != replayed && replayed != 0 {
				b.Logf("the copy replayed to %.0f bytes, mydb to %.0f", bytes, replayed)
			}
			replayed = bytes
		}
		b.ResetTimer()
		for range b.N {
			runs++
			if runs%2 == 0 {
				byCopy(runs)
				viaMydb(runs)
			} else {
				viaMydb(runs)
				byCopy(runs)
			}
		}
		b.StopTimer()
		mib := func(seconds float64) float64 { return replayed * float64(b.N) / (1 << 20) / seconds }
		b.ReportMetric(replayed/(1<<20), "WAL-MiB")
		b.ReportMetric(mib(mydbSeconds), "mydb-MiB/s")
		b.ReportMetric(mib(copySeconds), "cp-MiB/s")
		b.ReportMetric(mib(mydbSeconds)/mib(copySeconds), "mydb/cp")
	})
}

// writeFileFrom writes r to path, owned by the engine's OS user.
func (c *cluster) writeFileFrom(path string, r io.Reader) {
	c.t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = io.Copy(f, r)
	if err = errors.Join(err, f.Close(), os.Chown(path, c.uid, c.gid)); err != nil {
		c.t.Fatal(err)
	}
}

// redoDone reads PostgreSQL's "redo done" line in log: the bytes replayed
// from the backup's end, and the seconds the replay took.
func redoDone(b *testing.B, from, log string) (float64, float64) {
	b.Helper()
	m := redoDoneRE.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		b.Fatalf("no \"redo done\" line in the log: %s", lastLines(log, 10))
	}
	last := m[len(m)-1]
	end, err1 := api.ParseLSN(last[1])
	start, err2 := api.ParseLSN(from)
	seconds, err3 := strconv.ParseFloat(last[2], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		b.Fatalf("%q: %v %v %v", last[0], err1, err2, err3)
	}
	if seconds <= 0 {
		seconds = 0.001 // PostgreSQL rounds to hundredths
	}
	return float64(end - start), seconds
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
