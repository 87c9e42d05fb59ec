package mariadb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

var _ instance.DataUpgrader = (*Driver)(nil)

// upgradeInfoFiles are where mariadb-install-db and mariadb-upgrade record
// the version that last upgraded the data (the first name since MariaDB
// 11.x, the second before; 11.x reads both).
var upgradeInfoFiles = []string{"mariadb_upgrade_info", "mysql_upgrade_info"}

// backupInfoFiles are where mariadb-backup records the server it copied
// (the first name since MariaDB 11.x, the second before).
var backupInfoFiles = []string{"mariadb_backup_info", "xtrabackup_info"}

var backupServerVersion = regexp.MustCompile(`(?m)^server_version\s*=\s*(\S+)`)

// releaseOf is the x.y.z a version string starts with ("10.11.19" of
// "10.11.19-MariaDB-0+deb12u1"), or "" when it has none.
var releaseOf = regexp.MustCompile(`^\d+\.\d+\.\d+`)

// UpgradeData implements instance.DataUpgrader: when the data was last
// upgraded by another MariaDB version (a new image on a claim an older
// line wrote, which the server starts on), mariadb-upgrade brings the
// system tables to the running server's version and checks the tables.
// It runs on every instance, replicas too, and writes nothing to the
// binary log: each instance upgrades its own data, and a replica's GTID
// position stays the primary's.
func (d *Driver) UpgradeData(ctx context.Context) error {
	c, err := d.Admin()
	if err != nil {
		return err
	}
	row, err := c.QueryRow(ctx, "SELECT VERSION() AS version")
	if err != nil {
		return err
	}
	running := releaseOf.FindString(row["version"])
	recorded, err := upgradedRelease(d.DataDir)
	if err != nil {
		return err
	}
	if running != "" && recorded == running {
		return nil
	}
	u, err := user.Current()
	if err != nil {
		return err
	}
	d.cfg.Log.Info("upgrading the data with mariadb-upgrade", "from", orUnrecorded(recorded), "to", row["version"])
	var out bytes.Buffer
	// --force: the record above decided, not the tool's own look at it.
	// --skip-ssl: a socket needs no TLS, and MariaDB 11's clients insist on
	// verifying a server that has a certificate, which a socket login
	// without a password cannot.
	cmd := d.cfg.Tool(ctx, "mariadb-upgrade", "--no-defaults", "--socket="+d.socket(), "--user="+u.Username,
		"--skip-ssl", "--tmpdir="+d.cfg.RunDir, "--skip-write-binlog", "--force", "--silent")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mariadb-upgrade from %s to %s: %w: %s", orUnrecorded(recorded), running, err, instance.LastLines(out.String(), 5))
	}
	d.cfg.Log.Info("upgraded the data", "to", running)
	return nil
}

// upgradedRelease is the x.y.z of the version the data was last upgraded
// by, "" when no file records one.
func upgradedRelease(dataDir string) (string, error) {
	for _, name := range upgradeInfoFiles {
		b, err := os.ReadFile(filepath.Join(dataDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return releaseOf.FindString(strings.TrimSpace(strings.TrimRight(string(b), "\x00"))), nil
	}
	return "", nil
}

// upgradeRecordOfBackup is the upgrade record of a prepared backup in dir
// (a clone's or a restore's): the version of the server it copied, whose
// data it is. mariadb-backup copies no record, and without one every clone
// would be upgraded at its first start. Nil when the backup does not say
// (the upgrade then runs, which is safe).
func upgradeRecordOfBackup(dir string) (map[string]string, error) {
	for _, name := range backupInfoFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m := backupServerVersion.FindSubmatch(b)
		if m == nil {
			return nil, nil
		}
		release := releaseOf.FindString(string(m[1]))
		if release == "" {
			return nil, nil
		}
		return map[string]string{upgradeInfoFiles[1]: release + "-MariaDB"}, nil
	}
	return nil, nil
}

func orUnrecorded(release string) string {
	if release == "" {
		return "an unrecorded version"
	}
	return release
}
