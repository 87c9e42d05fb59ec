package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

var _ instance.WALArchiver = (*Driver)(nil)

// archiveArgs are the server settings of continuous archiving, on the
// command line so ALTER SYSTEM cannot turn it off: archive_mode on (only a
// primary archives; a promoted replica starts with its new timeline's
// history), each file through the manager, and archive_timeout so an idle
// primary's WAL still reaches the archive.
func (d *Driver) archiveArgs() []string {
	if !d.cfg.ArchiveWAL {
		return nil
	}
	timeout := d.cfg.ArchiveTimeout
	if timeout <= 0 {
		timeout = instance.DefaultArchiveTimeout
	}
	return []string{"-c", "archive_mode=on", "-c", "archive_command=" + d.cfg.ArchiveCommand,
		"-c", fmt.Sprintf("archive_timeout=%dms", timeout.Milliseconds())}
}

// ArchiveHeartbeat implements instance.WALArchiver: a transaction given a
// transaction ID writes a commit record though it changes nothing.
func (d *Driver) ArchiveHeartbeat(ctx context.Context) (string, error) {
	p, err := d.adminPool()
	if err != nil {
		return "", err
	}
	if _, err := p.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		return "", err
	}
	var file string
	err = p.QueryRow(ctx, "SELECT pg_walfile_name(pg_current_wal_insert_lsn())").Scan(&file)
	return file, err
}

// ReadyFiles implements instance.WALArchiver: the files the archiver has
// not handed over yet (archive_status/*.ready), oldest first.
func (d *Driver) ReadyFiles() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(d.DataDir(), "pg_wal", "archive_status"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".ready"); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// WALDir implements instance.WALArchiver.
func (d *Driver) WALDir() string { return filepath.Join(d.DataDir(), "pg_wal") }

// ReceivedSegments implements instance.WALArchiver: a standby marks each
// segment it received .done (archive_mode on archives on a primary only).
func (d *Driver) ReceivedSegments() ([]string, error) {
	status := filepath.Join(d.DataDir(), "pg_wal", "archive_status")
	entries, err := os.ReadDir(status)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name, done := strings.CutSuffix(e.Name(), ".done")
		if done && len(name) == 24 && strings.Trim(name, "0123456789ABCDEF") == "" {
			out = append(out, filepath.Join(d.DataDir(), "pg_wal", name))
		}
	}
	return out, nil
}
