package postgres

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// Clone implements instance.Driver: pg_basebackup with WAL streamed
// through this replica's slot into a scratch directory, made a standby of
// t's primary, then renamed into place.
func (d *Driver) Clone(ctx context.Context, t instance.Topology) error {
	// The timeline last streamed on belongs to the data being replaced.
	d.mu.Lock()
	d.receivedTimeline = 0
	d.mu.Unlock()
	if err := d.writePassfile(); err != nil {
		return err
	}
	if err := d.freshSlot(ctx, t); err != nil {
		return err
	}
	tmp := d.DataDir() + ".clone"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err := d.cfg.Tool(ctx, "pg_basebackup", "-D", tmp, "--dbname="+d.conninfo(t),
		"--wal-method=stream", "--slot="+SlotName(d.cfg.Name), "--checkpoint=fast", "--no-password").Run()
	if err != nil {
		return fmt.Errorf("pg_basebackup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "standby.signal"), nil, 0o600); err != nil {
		return err
	}
	// The primary's own postgresql.auto.conf came along; if it was once a
	// standby it names its old primary. Start out following t's.
	if err := d.setAutoConf(tmp, map[string]string{
		"primary_conninfo":  d.conninfo(t),
		"primary_slot_name": SlotName(d.cfg.Name),
	}); err != nil {
		return err
	}
	return d.commitDataDir(tmp)
}

// setAutoConf replaces settings in postgresql.auto.conf (the file ALTER
// SYSTEM writes) of a stopped data directory; an empty value removes one.
func (d *Driver) setAutoConf(dataDir string, settings map[string]string) error {
	path := filepath.Join(dataDir, "postgresql.auto.conf")
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, "=")
		if _, replaced := settings[strings.TrimSpace(name)]; replaced {
			continue
		}
		out.WriteString(line + "\n")
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if v := settings[name]; v != "" {
			fmt.Fprintf(&out, "%s = %s\n", name, quoteLiteral(v))
		}
	}
	return os.WriteFile(path, out.Bytes(), 0o600)
}
