package mariadb

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

const (
	headerSystemID = "X-Mydb-System-Identifier"
	// trailerResult tells the client whether the backup finished: the
	// status code went out before the first byte of the stream.
	trailerResult = "X-Mydb-Clone-Result"
)

// cloneClient has no overall timeout (a large clone takes long) but gives
// up on a primary that does not start answering. It authenticates as the
// instance with creds, to the primary whose certificate names primary.
func cloneClient(creds *api.Credentials, primary string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       creds.TLSConfig(primary),
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: time.Minute,
	}}
}

// ServeClone implements instance.CloneServer on the primary: a physical
// backup of the running server, streamed as mbstream. The Manager has
// authenticated the client as an instance of the database.
func (d *Driver) ServeClone(w http.ResponseWriter, r *http.Request) {
	id, err := d.SystemID()
	if err != nil {
		http.Error(w, "no system identifier: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// Only a writable primary serves a clone. A replica being promoted
	// still applies its relay log, and the backup's BACKUP STAGE
	// BLOCK_COMMIT would hold the applier's commits, so the promotion
	// waits for the backup and the backup for the promotion.
	if c, err := d.Server.Admin(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	} else if st, err := c.QueryRow(r.Context(), Dialect{}.StateQuery()); err != nil || st["writable"] != "1" {
		http.Error(w, fmt.Sprintf("the server is not a writable primary yet (%v): retry", err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set(headerSystemID, id)
	w.Header().Set("Trailer", trailerResult)
	w.WriteHeader(http.StatusOK)
	start := time.Now()
	if _, err := d.streamBackup(r.Context(), w); err != nil {
		d.cfg.Log.Error("clone stream failed", "client", r.RemoteAddr, "err", err)
		w.Header().Set(trailerResult, "failed: "+err.Error())
		return
	}
	d.cfg.Log.Info("clone streamed", "client", r.RemoteAddr, "seconds", time.Since(start).Seconds())
	w.Header().Set(trailerResult, "ok")
}

// lastChangeRE finds the backup's GTID position in mariadb-backup's log
// ("MySQL binlog position: filename 'mydb-bin.000003', position '385',
// GTID of the last change '0-1-42'").
var lastChangeRE = regexp.MustCompile(`GTID of the last change '([^']*)'`)

// streamBackup writes a physical backup of the running server to w as
// mbstream and returns its GTID position ("" before the first write).
func (d *Driver) streamBackup(ctx context.Context, w io.Writer) (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	// --target-dir only holds the tool's bookkeeping: the data goes to w.
	scratch, err := os.MkdirTemp(d.cfg.RunDir, "backup-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	var log bytes.Buffer
	// The socket admin user needs no password; stderr is the server log.
	// --skip-ssl: MariaDB 11's tools otherwise insist on verifying the
	// certificate of a server that has one, even over the socket, which a
	// login without a password cannot (every backup and clone of 11.8
	// failed so).
	cmd := d.cfg.Tool(ctx, "mariadb-backup", "--no-defaults", "--backup", "--stream=mbstream",
		"--target-dir="+scratch, "--socket="+d.socket(), "--user="+u.Username, "--skip-ssl", "--parallel=2")
	cmd.Stdout = w
	cmd.Stderr = io.MultiWriter(d.cfg.Stderr, &tailBuffer{b: &log, max: 64 << 10})
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mariadb-backup: %w", err)
	}
	if m := lastChangeRE.FindStringSubmatch(log.String()); m != nil {
		return m[1], nil
	}
	return "", nil
}

// tailBuffer keeps the last max bytes written to it, where the tool logs
// its result.
type tailBuffer struct {
	b   *bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

// Clone implements instance.Driver on a replica: the primary's stream
// unpacked into a scratch directory, prepared, given the primary's system
// identifier and the backup's GTID position, then renamed into place.
func (d *Driver) Clone(ctx context.Context, t instance.Topology) error {
	if t.PrimaryStatusURL == "" {
		return fmt.Errorf("topology has no primaryStatusURL to clone from")
	}
	tmp := d.DataDir + ".clone"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(t.PrimaryStatusURL, "/")+api.PathClone, nil)
	if err != nil {
		return err
	}
	resp, err := cloneClient(d.cfg.Identity.Credentials(), t.Primary).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("clone endpoint: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	id := resp.Header.Get(headerSystemID)
	if id == "" {
		return fmt.Errorf("clone endpoint sent no system identifier")
	}
	x := d.cfg.Tool(ctx, "mbstream", "-x", "-C", tmp)
	x.Stdin = resp.Body
	if err := x.Run(); err != nil {
		return fmt.Errorf("mbstream: %w", err)
	}
	// mbstream stops at the stream's end; make sure that was the body's.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if r := resp.Trailer.Get(trailerResult); r != "ok" {
		return fmt.Errorf("the primary's backup did not finish: %q", r)
	}
	if err := d.cfg.Tool(ctx, "mariadb-backup", "--no-defaults", "--prepare", "--target-dir="+tmp).Run(); err != nil {
		return fmt.Errorf("mariadb-backup --prepare: %w", err)
	}
	gtid, err := backupGTID(tmp)
	if err != nil {
		return err
	}
	extra, err := upgradeRecordOfBackup(tmp)
	if err != nil {
		return err
	}
	if extra == nil {
		extra = map[string]string{}
	}
	extra[cloneGTIDFile] = gtid
	return d.Complete(tmp, id, extra)
}

// backupGTID is the GTID position of the backup, the third field of the
// binlog info file mariadb-backup writes ("mydb-bin.000003\t385\t0-1-42").
func backupGTID(dir string) (string, error) {
	for _, name := range []string{"mariadb_backup_binlog_info", "xtrabackup_binlog_info"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		return parseBinlogInfo(string(b))
	}
	return "", fmt.Errorf("the backup has no binlog info file")
}

func parseBinlogInfo(s string) (string, error) {
	f := strings.Fields(s)
	switch len(f) {
	case 2:
		return "", nil // no GTID yet: a primary that never wrote
	case 3:
		return f[2], nil
	}
	return "", fmt.Errorf("binlog info %q: want file, position and GTID", strings.TrimSpace(s))
}
