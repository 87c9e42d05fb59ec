//go:build engines

package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/instanceproc"
)

// The volume destination: the backup streams to `mydb-instance
// dump-server`, as the short-lived pod that mounts the backup's own claim
// runs it, with a directory standing in for the claim; a restore reads it
// from a read-only dump server authenticated with the new database's
// credentials. Run next to the S3 tests, on addresses of their own.
func TestPostgresVolumeBackupRestore(t *testing.T) {
	t.Parallel()
	b := postgresBackup()
	b.srcPrefix, b.dstPrefix = "127.0.139.", "127.0.140."
	testVolumeBackupRestore(t, b)
}

func TestMariaDBVolumeBackupRestore(t *testing.T) {
	t.Parallel()
	b := mariadbBackup()
	b.srcPrefix, b.dstPrefix = "127.0.141.", "127.0.142."
	testVolumeBackupRestore(t, b)
}

func TestMySQLVolumeBackupRestore(t *testing.T) {
	t.Parallel()
	b := mysqlBackup()
	b.srcPrefix, b.dstPrefix = "127.0.143.", "127.0.144."
	testVolumeBackupRestore(t, b)
}

func testVolumeBackupRestore(t *testing.T, b backupSpec) {
	name := b.engine.name
	src := newClusterIn(t, b.engine, "volume-src-"+name, b.srcPrefix, 1)
	p := src.nodes[0]
	p.start()
	src.setPrimary(p)
	p.waitReady(time.Minute, api.RolePrimary)
	b.load(t, p)
	want := b.checksums(t, p)

	claim := filepath.Join(root, "volume-claim-"+name)
	if err := os.MkdirAll(claim, 0o700); err != nil {
		t.Fatal(err)
	}
	writer := startDumpServer(t, src, b.srcPrefix+"9", claim, false)
	writer.Claim = "claim"
	op := p.backupTo(t, "volume-backup", api.Destination{Volume: &writer})
	if op.Size < 20<<20 || op.Bytes != op.Size || op.Position == nil || *op.Position == (api.Position{}) || !strings.Contains(op.Message, "pvc://claim") {
		t.Fatalf("backup: %+v", op)
	}
	// The claim holds exactly the stream: its size and SHA-256 are the
	// backup's, and so is what the server recorded next to it.
	f, err := os.Open(filepath.Join(claim, "dump"))
	if err != nil {
		t.Fatal(err)
	}
	size, sum := digest(f)
	f.Close()
	var recorded instance.DumpInfo
	data, _ := os.ReadFile(filepath.Join(claim, "dump.json"))
	_ = json.Unmarshal(data, &recorded)
	if size != op.Size || sum != op.SHA256 || recorded.Size != op.Size || recorded.SHA256 != op.SHA256 {
		t.Fatalf("the claim holds %d bytes %s (recorded %+v); the backup says %d %s", size, sum, recorded, op.Size, op.SHA256)
	}
	entries, _ := os.ReadDir(claim)
	if len(entries) != 2 {
		t.Errorf("the claim holds %d entries, want the dump and its record", len(entries))
	}
	// Written once: a second backup to the claim is refused.
	c, host := p.manager()
	if _, err := c.StartBackup(context.Background(), host, p.auth(), api.BackupRequest{ID: "volume-again",
		Destination: api.Destination{Volume: &writer}}); err != nil {
		t.Fatalf("POST %s: %v", api.PathBackups, err)
	}
	again := p.waitBackup(t, "volume-again")
	if again.Phase != api.OperationFailed || !strings.Contains(again.Message, "holds a dump already") {
		t.Errorf("a second backup to the claim: %+v", again)
	}

	dst := newClusterIn(t, b.engine, "volume-dst-"+name, b.dstPrefix, 1)
	dp := dst.nodes[0]
	dp.extraArgs = []string{"--restore"}
	dp.start()
	dst.setPrimary(dp)
	dp.waitStatus(time.Minute, "awaiting its restore", func(s api.Status) bool { return s.AwaitingRestore })

	t.Run("a corrupted claim fails the restore and leaves no data", func(t *testing.T) {
		bad := filepath.Join(root, "volume-corrupt-"+name)
		if err := os.MkdirAll(bad, 0o700); err != nil {
			t.Fatal(err)
		}
		dump, _ := os.ReadFile(filepath.Join(claim, "dump"))
		dump[len(dump)/2] ^= 0xff
		if err := os.WriteFile(filepath.Join(bad, "dump"), dump, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bad, "dump.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		reader := startDumpServer(t, dst, b.dstPrefix+"8", bad, true)
		reader.Claim = "corrupt"
		dp.postRestoreFrom(t, "volume-corrupt", api.Destination{Volume: &reader}, op)
		s := dp.waitStatus(2*time.Minute, "the failed restore", func(s api.Status) bool {
			return s.Restore != nil && s.Restore.ID == "volume-corrupt" && s.Restore.Phase == api.OperationFailed && s.AwaitingRestore
		})
		if !strings.Contains(s.Restore.Message, "checksum mismatch") || s.Ready {
			t.Errorf("restore of a corrupted dump: %+v, ready %v", s.Restore, s.Ready)
		}
		dp.assertNoData(t)
	})

	t.Run("the restore holds the source's rows", func(t *testing.T) {
		reader := startDumpServer(t, dst, b.dstPrefix+"9", claim, true)
		reader.Claim = "claim"
		// The source's instances do not read the new database's server:
		// their certificates are of another CA.
		if code := getAs(reader.Address, reader.Server, "/v1/dump", dst.ca, src.ca.Instance("db-0")); code != 0 {
			t.Errorf("the source's instance certificate on the restore's dump server: %d, want the handshake refused", code)
		}
		// Nor does the controller, whose certificate is the database's.
		if code := getAs(reader.Address, reader.Server, "/v1/dump", dst.ca, dst.controller); code != http.StatusForbidden {
			t.Errorf("the controller on the restore's dump server: %d, want 403", code)
		}
		dp.postRestoreFrom(t, "volume-restore", api.Destination{Volume: &reader}, op)
		dp.waitReady(3*time.Minute, api.RolePrimary)
		s, _ := dp.status()
		if r := s.Restore; r == nil || r.Phase != api.OperationSucceeded || r.Bytes != op.Size {
			t.Fatalf("restore %+v", r)
		}
		if got := b.checksums(t, dp); !equalMaps(got, want) {
			t.Errorf("restored from the volume:\n got %v\nwant %v", got, want)
		}
		b.credentials(t, dp, src)
		t.Logf("%s volume figures:\n  backup from the primary: %s\n  restore (load, verify, recovery, credentials): %s",
			name, throughput(op), throughput(*s.Restore))
	})
	// The restore's server mounted the claim read-only: the dump is as it was.
	f, err = os.Open(filepath.Join(claim, "dump"))
	if err != nil {
		t.Fatal(err)
	}
	if size, after := digest(f); size != op.Size || after != op.SHA256 {
		t.Errorf("the dump changed during the restore: %d bytes %s", size, after)
	}
	f.Close()
}

// startDumpServer runs `mydb-instance dump-server` on host for the
// directory dir with c's credentials, until the test ends, and returns
// where it answers and the name its certificate carries, once it answers.
func startDumpServer(t *testing.T, c *cluster, host, dir string, readOnly bool) api.VolumeObject {
	t.Helper()
	address := net.JoinHostPort(host, strconv.Itoa(freePort(t, host)))
	name := "dump-" + host
	args := []string{"dump-server", "--dir=" + dir, "--secrets-dir=" + filepath.Join(c.dir, "secrets"), "--address=" + address,
		"--name=" + name, "--ip=" + host}
	if readOnly {
		args = append(args, "--read-only")
	}
	p, err := instanceproc.Start(instanceproc.Options{Binary: binary, Args: args, Log: dir + "-" + host + ".log"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(30 * time.Second) })
	waitFor(t, 30*time.Second, "the dump server on "+address, func() error {
		if code := getAs(address, name, "/healthz", c.ca, nil); code != http.StatusOK {
			return fmt.Errorf("/healthz answered %d", code)
		}
		return nil
	})
	return api.VolumeObject{Address: address, Server: name}
}
